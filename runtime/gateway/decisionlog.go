package gateway

import (
	"io"
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

// BatchLog is a DecisionLog that can record several decisions at once. The
// gateway uses it for a listing, whose every item is a decision: the
// listing is answered only once LogAll has returned nil for all of them.
type BatchLog interface {
	DecisionLog
	LogAll(rs []Record) error
}

// JSONLog writes each record as one line of JSON, with one Write call per
// line (per listing, for LogAll), so lines from concurrent decisions never
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
	_, err := l.w.Write(l.buf)
	return err
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
	_, err := l.w.Write(l.buf)
	if cap(l.buf) > maxKeptBuffer {
		l.buf = nil // one large listing does not keep its buffer for good
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
