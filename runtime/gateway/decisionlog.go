package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/principal"
	"github.com/policyc/policyc/runtime/table"
)

// Op is what a client was doing when a decision was made.
type Op uint8

// Ops.
const (
	// OpList: an item was shown or hidden in a listing.
	OpList Op = iota
	// OpCall: tools/call.
	OpCall
	// OpGet: prompts/get.
	OpGet
	// OpRead: resources/read.
	OpRead
	// OpLink: a tool's _meta UI link to a ui:// resource was kept or dropped.
	OpLink
	// OpApproval: the approval gate's verdict on a held call.
	OpApproval
)

var opNames = [...]string{"list", "call", "get", "read", "link", "approval"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Record is one decision, as the decision log keeps it. It never holds a
// call's arguments: only who asked for what, and what the table said.
type Record struct {
	Time time.Time
	// Principal is who asked: a principal's name, or a principal.Ref of
	// an access token's principal, groups, issuer and subject.
	Principal string
	Server    string
	Kind      table.Kind
	// Name is the upstream's own tool or prompt name, or the resource URI:
	// the name the table decided on.
	Name     string
	Op       Op
	Decision decide.Decision
	// Verdict is set for OpApproval: "approved", "denied", "timeout",
	// "cancelled" (the call ended, undecided, before its hold did),
	// "ended" (the call's session ended while it was held: deleted, or closed idle),
	// "pending" (its hold in place ended with the request pending: the
	// agent was told to wait for it), "refused" (no request was made: too
	// many pending), "duplicate" (folded into an approval once another
	// call used),
	// "not_run" (approved, but the approval could not be used) or "error".
	Verdict string
	// Request is the approval request's id, for OpApproval, when the gate
	// named one.
	Request string
	// TableDigest and TableSerial identify the table that decided.
	TableDigest string
	TableSerial uint64
}

// DecisionLog receives every decision the gateway makes. Log must be safe
// for concurrent use. When Log fails the gateway refuses what the decision
// would have allowed: a decision that cannot be recorded is not acted on.
type DecisionLog interface {
	Log(r *Record) error
}

// BatchLog is a DecisionLog that can record several decisions at once: a
// listing's, when the log is not a ListingLog, in one call rather than one
// per item. The listing is answered only once LogAll has returned nil for
// all of them.
type BatchLog interface {
	DecisionLog
	LogAll(rs []Record) error
}

// ListingLog is a DecisionLog that records a listing as one record of
// counts (ListingRecord) rather than one record per item. The listing is
// answered only once LogListing has returned nil.
type ListingLog interface {
	DecisionLog
	LogListing(r *ListingRecord) error
}

// ListingRecord is one listing (tools/list, prompts/list, resources/list,
// resources/templates/list), as the decision log keeps it: how many items
// of each server each decision gave, and a digest of the names hidden.
type ListingRecord struct {
	Time time.Time
	// Principal is who asked, as in Record.
	Principal string
	// Method is the listing's MCP method.
	Method string
	// Groups are the decisions by server, kind and op (OpList for the
	// items listed or hidden, OpLink for the UI links of listed items
	// kept or dropped), in the order the listing first made each.
	Groups      []ListingGroup
	TableDigest string
	TableSerial uint64
}

// ListingGroup is the decisions of one listing about one server's items of
// one kind and op.
type ListingGroup struct {
	Server string
	Kind   table.Kind
	Op     Op
	// Counts are the decisions by effect (indexed by table.Effect).
	Counts [3]int
	// Hidden counts the items left out of the listing (or the links
	// dropped); HiddenDigest is "sha256:" and the hex SHA-256 of their
	// names, each as a JSON string followed by a newline, in the
	// upstream's order (HiddenDigestOf). Empty when none is hidden.
	Hidden       int
	HiddenDigest string
}

// HiddenDigestOf is the ListingGroup.HiddenDigest of the names hidden, in
// the order listed, for an auditor to check a catalogue against.
func HiddenDigestOf(names []string) string {
	if len(names) == 0 {
		return ""
	}
	h := sha256.New()
	var b []byte
	for _, n := range names {
		b = appendString(b[:0], n)
		b = append(b, '\n')
		h.Write(b)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// JSONLog writes each record as one line of JSON, and a listing as one
// line of counts (LogListing, AppendListing), with one Write call per line
// (per batch, for LogAll), so lines from concurrent decisions never
// interleave.
//
// A line looks like this (one line; wrapped here):
//
//	{"time":"2026-05-01T12:00:00.000000001Z","principal":"alice","server":"github",
//	 "kind":"tool","name":"create_issue","op":"call","decision":"allow","reason":"rule",
//	 "scope":"server","origin":"github.cue:5","table_digest":"sha256:…","table_serial":42}
//
// "groups", "issuer" and "subject" follow "principal" for a client of an
// identity provider's access token (Record.Principal is then a
// principal.Ref). "verdict" (and "request", the approval request's id,
// when the gate named one) is added for approval records; "scope" and "origin" are empty when
// no rule or default decided (an unknown server, a ui:// resource off the
// allowlist).
type JSONLog struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewJSONLog returns a decision log writing JSON lines to w.
func NewJSONLog(w io.Writer) *JSONLog { return &JSONLog{w: w} }

// Log writes one record.
func (l *JSONLog) Log(r *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = AppendRecord(l.buf[:0], r)
	return l.write()
}

// LogAll writes the records' lines together, in one Write call.
func (l *JSONLog) LogAll(rs []Record) error {
	if len(rs) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = l.buf[:0]
	for i := range rs {
		l.buf = AppendRecord(l.buf, &rs[i])
	}
	return l.write()
}

// LogListing writes the listing's record as one line.
func (l *JSONLog) LogListing(r *ListingRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = AppendListing(l.buf[:0], r)
	return l.write()
}

// write writes the buffer, and lets it go when it grew past maxKeptBuffer:
// one large record (a call naming a tool of megabytes, a listing of
// thousands of items) does not keep its buffer for good.
func (l *JSONLog) write() error {
	_, err := l.w.Write(l.buf)
	if cap(l.buf) > maxKeptBuffer {
		l.buf = nil
	}
	return err
}

// maxKeptBuffer is the largest line buffer a JSONLog keeps between writes:
// enough for the lines of a listing of a few thousand items.
const maxKeptBuffer = 1 << 20

// AppendRecord appends the JSON line of r, newline included, to b.
func AppendRecord(b []byte, r *Record) []byte {
	b = append(b, `{"time":"`...)
	b = r.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","principal":`...)
	b = appendPrincipal(b, r.Principal)
	b = append(b, `,"server":`...)
	b = appendString(b, r.Server)
	b = append(b, `,"kind":"`...)
	b = append(b, r.Kind.String()...)
	b = append(b, `","name":`...)
	b = appendString(b, r.Name)
	b = append(b, `,"op":"`...)
	b = append(b, r.Op.String()...)
	b = append(b, `","decision":"`...)
	b = append(b, r.Decision.Effect.String()...)
	b = append(b, `","reason":`...)
	b = appendString(b, r.Decision.Reason.String())
	b = append(b, `,"scope":`...)
	b = appendString(b, r.Decision.Scope)
	b = append(b, `,"origin":`...)
	b = appendString(b, r.Decision.Origin)
	if r.Verdict != "" {
		b = append(b, `,"verdict":`...)
		b = appendString(b, r.Verdict)
	}
	if r.Request != "" {
		b = append(b, `,"request":`...)
		b = appendString(b, r.Request)
	}
	b = append(b, `,"table_digest":`...)
	b = appendString(b, r.TableDigest)
	b = append(b, `,"table_serial":`...)
	b = strconv.AppendUint(b, r.TableSerial, 10)
	return append(b, "}\n"...)
}

// AppendListing appends the JSON line of a listing's record, newline
// included, to b:
//
//	{"time":"…","principal":"alice","op":"list","method":"tools/list",
//	 "allow":12,"approve":1,"deny":89987,"hidden":89987,
//	 "servers":[{"server":"github","kind":"tool","op":"list","allow":12,"approve":1,
//	   "deny":89987,"hidden":89987,"hidden_digest":"sha256:…"},
//	  {"server":"github","kind":"resource","op":"link","allow":1,"approve":0,"deny":1,
//	   "hidden":1,"hidden_digest":"sha256:…"}],
//	 "table_digest":"sha256:…","table_serial":42}
//
// The counts at the top add up the groups of op "list": the items listed
// and hidden.
func AppendListing(b []byte, r *ListingRecord) []byte {
	var total [3]int
	hidden := 0
	for i := range r.Groups {
		if g := &r.Groups[i]; g.Op == OpList {
			for e := range total {
				total[e] += g.Counts[e]
			}
			hidden += g.Hidden
		}
	}
	b = append(b, `{"time":"`...)
	b = r.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","principal":`...)
	b = appendPrincipal(b, r.Principal)
	b = append(b, `,"op":"list","method":`...)
	b = appendString(b, r.Method)
	b = appendCounts(b, total, hidden)
	b = append(b, `,"servers":[`...)
	for i := range r.Groups {
		g := &r.Groups[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"server":`...)
		b = appendString(b, g.Server)
		b = append(b, `,"kind":"`...)
		b = append(b, g.Kind.String()...)
		b = append(b, `","op":"`...)
		b = append(b, g.Op.String()...)
		b = append(b, '"')
		b = appendCounts(b, g.Counts, g.Hidden)
		if g.HiddenDigest != "" {
			b = append(b, `,"hidden_digest":`...)
			b = appendString(b, g.HiddenDigest)
		}
		b = append(b, '}')
	}
	b = append(b, `],"table_digest":`...)
	b = appendString(b, r.TableDigest)
	b = append(b, `,"table_serial":`...)
	b = strconv.AppendUint(b, r.TableSerial, 10)
	return append(b, "}\n"...)
}

func appendCounts(b []byte, counts [3]int, hidden int) []byte {
	for _, e := range [...]table.Effect{table.Allow, table.Approve, table.Deny} {
		b = append(b, `,"`...)
		b = append(b, e.String()...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, int64(counts[e]), 10)
	}
	b = append(b, `,"hidden":`...)
	return strconv.AppendInt(b, int64(hidden), 10)
}

// appendPrincipal appends the principal's name as a JSON string and, for
// a reference from an access token (principal.Ref), its groups, issuer and
// subject as fields of their own: "principal":"bob","groups":["ops"],
// "issuer":"https://idp.example.com","subject":"248289761001". The token
// itself is never in a record.
func appendPrincipal(b []byte, ref string) []byte {
	name := principal.Name(ref)
	b = appendString(b, name)
	if len(name) == len(ref) {
		return b
	}
	if groups := principal.Groups(ref); groups != "" {
		b = append(b, `,"groups":[`...)
		for i := 0; groups != ""; i++ {
			var g string
			g, groups, _ = strings.Cut(groups, ",")
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, g)
		}
		b = append(b, ']')
	}
	if iss := principal.Issuer(ref); iss != "" {
		b = append(b, `,"issuer":`...)
		b = appendString(b, iss)
		b = append(b, `,"subject":`...)
		b = appendString(b, principal.Subject(ref))
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does, so every line is valid JSON whatever a client sent.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	// Most names need no escaping: copy the plain prefix in one append.
	plain := 0
	for plain < len(s) {
		if c := s[plain]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			break
		}
		plain++
	}
	b = append(b, s[:plain]...)
	for i := plain; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c >= 0x20 && c != 0x7f:
				b = append(b, c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but some line-oriented readers split on them.
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// LogFile is a decision log file, appended to, that Reopen opens again by
// its path: once the file has been renamed (rotated), the lines after
// Reopen go to a new file of that name. Every Write goes wholly to the old
// file or wholly to the new one, so no line is lost or split by a
// rotation.
type LogFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// OpenLogFile opens path for appending, creating it (mode 0600) if needed.
func OpenLogFile(path string) (*LogFile, error) {
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &LogFile{path: path, f: f}, nil
}

func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// Path is the file's path.
func (l *LogFile) Path() string { return l.path }

// Write appends p to the file.
func (l *LogFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, fmt.Errorf("decision log %s is closed", l.path)
	}
	return l.f.Write(p)
}

// Reopen opens the file's path anew and writes there from now on, closing
// the file written so far. When the path cannot be opened, the file
// written so far stays in use and the error says why.
func (l *LogFile) Reopen() error {
	f, err := openAppend(l.path)
	if err != nil {
		return fmt.Errorf("reopen the decision log: %w; lines still go to the file open before", err)
	}
	l.mu.Lock()
	old := l.f
	if old == nil {
		l.mu.Unlock()
		f.Close()
		return fmt.Errorf("decision log %s is closed", l.path)
	}
	l.f = f
	l.mu.Unlock()
	return old.Close()
}

// Close closes the file; a Write after it fails.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
