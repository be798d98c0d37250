// Package table defines the frozen decision table: the artifact the compiler
// writes, CI signs and the gateway loads.
//
// The encoding is canonical: struct fields are declared in sorted order, maps
// are sorted by encoding/json, the layout is fixed (two-space indent, no HTML
// escaping, one trailing newline) and nothing in it depends on the clock.
// Decode accepts only canonical bytes, so a table that decodes re-encodes to
// exactly the bytes that were read (and signed).
//
// This package must never evaluate CUE: it is shared by the compiler and the
// runtime, and the runtime never sees a policy source.
package table

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	// Writes the same bytes as encoding/json (the golden tables pin
	// them), and decodes and re-encodes a large table faster (see
	// docs/performance.md): a gateway's boot does both.
	"github.com/segmentio/encoding/json"

	"github.com/policyc/policyc/internal/jsonerr"
)

// Format is the format version this build writes and reads.
const Format = "policyc.table/v1"

// PayloadType is the DSSE payloadType of a signed table of this format.
const PayloadType = "application/vnd.policyc.table.v1+json"

// AllServers is the server key of a narrowing scope's rules that apply to
// every server (the `global` block of the policy, a group or a principal).
const AllServers = "*"

// Table is the whole decision table. Fields are declared in sorted JSON-key
// order; keep it that way, the canonical form depends on it.
type Table struct {
	// Channels are the approval and consent channels, by name.
	Channels map[string]Channel `json:"channels"`
	// Compiler names the compiler and its version.
	Compiler string `json:"compiler"`
	// Digest is "sha256:" and the hex digest of the canonical table with
	// Digest empty.
	Digest string `json:"digest"`
	// Expires, when set, is an RFC 3339 UTC time after which the table must
	// not be loaded.
	Expires string `json:"expires,omitempty"`
	// Format is the table format version, Format.
	Format string `json:"format"`
	// Items are the decisions for every catalogued item, when the policy
	// was compiled with a catalogue snapshot: sorted by server, kind, name
	// and principal. Each item has the decision for a principal with no
	// scope of their own, then one per named principal whose decision or
	// deciding rule differs from it. They record what the rules decided at
	// compile time; the gateway decides from the rules, never from this
	// list.
	Items []Item `json:"items,omitempty"`
	// Scopes are the narrowing scopes in evaluation order: global, then
	// groups, then principals, each sorted by name.
	Scopes []Scope `json:"scopes"`
	// Serial increases with every table built from a later commit; the
	// gateway refuses a table older than the last one it accepted.
	Serial uint64 `json:"serial"`
	// Servers holds the base scope: each server's own rules and defaults.
	Servers map[string]Server `json:"servers"`
	// Source is where the policy came from.
	Source Source `json:"source"`
}

// Source is the provenance of a table.
type Source struct {
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	// Dirty is set when the work tree's policy differs from the commit.
	Dirty      bool   `json:"dirty,omitempty"`
	PolicyPath string `json:"policy_path"`
	Repository string `json:"repository,omitempty"`
	Tree       string `json:"tree,omitempty"`
}

// Item is the frozen decision for one catalogued tool, prompt or resource,
// for a principal with no group or principal scope of their own or, when
// Principal is set, for that principal.
type Item struct {
	// Decision is "allow", "approve" or "deny".
	Decision string `json:"decision"`
	// DefinitionDigest pins the catalogued definition of the item
	// (catalog.Tool.DefinitionDigest and its kin): the gateway holds the
	// live definition to it as the server's Pins mode says.
	DefinitionDigest string `json:"definition_digest,omitempty"`
	// InputSchemaDigest is the catalogued tool's input-schema digest
	// ("sha256:..."); empty for prompts, resources and tools without one.
	InputSchemaDigest string `json:"input_schema_digest,omitempty"`
	// Kind is the name of a Kind: "tool", "prompt" or "resource".
	Kind string `json:"kind"`
	// Name is the tool or prompt name, or the resource URI.
	Name string `json:"name"`
	// Origin is the file:line of the deciding rule or default; empty for
	// the built-in deny.
	Origin string `json:"origin,omitempty"`
	// Principal, when set, names the principal the decision is for, whose
	// own scopes make it differ from the decision of the item without one.
	Principal string `json:"principal,omitempty"`
	Server    string `json:"server"`
}

// Less orders items by server, kind, name and principal, the item
// without a principal first.
func (it Item) Less(o Item) bool {
	if it.Server != o.Server {
		return it.Server < o.Server
	}
	if it.Kind != o.Kind {
		return it.Kind < o.Kind
	}
	if it.Name != o.Name {
		return it.Name < o.Name
	}
	return it.Principal < o.Principal
}

// Channel is a way to reach a human for approvals and consent.
type Channel struct {
	// Kind is "webhook" or "approvals_page".
	Kind         string `json:"kind"`
	Origin       string `json:"origin"`
	ReachesHuman bool   `json:"reaches_human"`
	URL          string `json:"url,omitempty"`
}

// Channel kinds.
const (
	ChannelWebhook       = "webhook"
	ChannelApprovalsPage = "approvals_page"
)

// Server holds the rules of one scope for one server, per kind. In the base
// scope all three kinds are present; in a narrowing scope a kind the scope
// says nothing about is nil.
type Server struct {
	// Audit, in the base scope, serves every request of the server as
	// allowed and logs what the rules decided (would_deny, would_hold).
	Audit bool `json:"audit,omitempty"`
	// Pins, in the base scope, is how the gateway holds the server's live
	// definitions to the items' DefinitionDigest: PinsEnforce, PinsWarn,
	// or PinsOff ("" is PinsOff).
	Pins     string  `json:"pins,omitempty"`
	Prompt   *Access `json:"prompt,omitempty"`
	Resource *Access `json:"resource,omitempty"`
	Tool     *Access `json:"tool,omitempty"`
	UI       *UI     `json:"ui,omitempty"`
}

// Pins modes of a server.
const (
	PinsEnforce = "enforce"
	PinsWarn    = "warn"
	PinsOff     = "off"
)

// Kind returns the access of the named kind, or nil.
func (s *Server) Kind(kind string) *Access {
	k, ok := ParseKind(kind)
	if !ok {
		return nil
	}
	return s.Access(k)
}

// Access returns the access of kind k, or nil.
func (s *Server) Access(k Kind) *Access {
	switch k {
	case Tool:
		return s.Tool
	case Prompt:
		return s.Prompt
	case Resource:
		return s.Resource
	}
	return nil
}

// Access is one scope's rules for one server and kind. Within it the first
// matching rule decides, and rules are stored deny first, then approve, then
// allow, each in source order; with no match, Default decides. In a
// narrowing scope Default is "allow" (the scope takes nothing away) unless the
// scope has an allow_list, when it is "deny" and DefaultOrigin points at it.
type Access struct {
	// ApprovalChannel is the channel approvals go to (base scope, tools).
	ApprovalChannel string `json:"approval_channel,omitempty"`
	// ApprovalTimeoutSeconds is how long a held call waits; in a narrowing
	// scope, a shorter value overrides.
	ApprovalTimeoutSeconds int    `json:"approval_timeout_seconds,omitempty"`
	Default                string `json:"default"`
	// DefaultOrigin is where the default was set; empty for the built-in
	// deny.
	DefaultOrigin string `json:"default_origin,omitempty"`
	Rules         []Rule `json:"rules"`
}

// Rule is one pattern of one list.
type Rule struct {
	Effect  string `json:"effect"`
	Origin  string `json:"origin"`
	Pattern string `json:"pattern"`
}

// UI is the SEP-1865 allowlist of ui:// resources of one server.
type UI struct {
	AllowList      []string `json:"allow_list"`
	ConsentChannel string   `json:"consent_channel,omitempty"`
	Origin         string   `json:"origin"`
}

// Scope is a narrowing scope: global, a group, or a principal.
type Scope struct {
	// Members are the principals of a group scope.
	Members []string `json:"members,omitempty"`
	// Name is "global", "group:NAME" or "principal:NAME".
	Name string `json:"name"`
	// Servers holds the scope's rules per server; AllServers applies to
	// every server.
	Servers map[string]Server `json:"servers"`
}

// AppliesTo reports whether the scope narrows the decisions of principal:
// global applies to everyone, a group to its members (Members is sorted),
// a principal scope to that principal. The anonymous principal "" is in no
// group and has no scope of its own.
func (sc *Scope) AppliesTo(principal string) bool {
	switch {
	case sc.Name == "global":
		return true
	case strings.HasPrefix(sc.Name, "group:"):
		i := sort.SearchStrings(sc.Members, principal)
		return principal != "" && i < len(sc.Members) && sc.Members[i] == principal
	case strings.HasPrefix(sc.Name, "principal:"):
		return principal != "" && sc.Name == "principal:"+principal
	}
	return false
}

// ScopeIndexes returns, for n scopes in order (scope(i) is the i-th), the
// indexes of those that apply to every principal and, for each principal
// a scope names, the indexes of those that apply to it; both in scope
// order. It is one pass over the scopes and their members, not a question
// to every scope about every principal, which grows with their product.
// Group members are sorted in what policyc writes; a group
// whose members are not (a table or policy built by hand) is asked with
// AppliesTo, so the answer is the same.
func ScopeIndexes(n int, scope func(i int) Scope) (everyone []int, each map[string][]int) {
	size := 0
	for i := range n {
		size += len(scope(i).Members) + 1
	}
	each = make(map[string][]int, size)
	for i := range n {
		sc := scope(i)
		var who []string
		switch {
		case sc.Name == "global":
			everyone = append(everyone, i)
		case strings.HasPrefix(sc.Name, "group:"):
			who = sc.Members
		case strings.HasPrefix(sc.Name, "principal:"):
			who = []string{strings.TrimPrefix(sc.Name, "principal:")}
		}
		sorted := slices.IsSorted(who)
		for _, p := range who {
			if at := each[p]; p != "" && (sorted || sc.AppliesTo(p)) && (len(at) == 0 || at[len(at)-1] != i) {
				each[p] = append(at, i)
			}
		}
	}
	return everyone, each
}

// Encode returns the canonical bytes of t with its digest computed and set.
func Encode(t *Table) ([]byte, error) {
	t.Digest = ""
	b, err := marshal(t)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	t.Digest = "sha256:" + hex.EncodeToString(sum[:])
	return marshal(t)
}

// Renews reports whether t is old re-signed with another expiry: equal in
// every field but the expiry and the digest (which covers the expiry).
func Renews(t, old *Table) bool {
	a, b := ContentDigest(t), ContentDigest(old)
	return a != "" && a == b
}

// ContentDigest is the digest of t's content: every field but the expiry
// and the digest. Two signings of one commit's table share it, whatever
// their expiry. "" when t does not encode.
func ContentDigest(t *Table) string {
	c := *t
	c.Expires, c.Digest = "", ""
	b, err := marshal(&c)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ExtendsExpiry reports whether expiry a (RFC 3339, "" for none) extends
// b: b has none and a adds one (which only restricts), or both are set and
// a is not earlier.
func ExtendsExpiry(a, b string) bool {
	if b == "" {
		return true
	}
	if a == "" {
		return false
	}
	ta, errA := time.Parse(time.RFC3339, a)
	tb, errB := time.Parse(time.RFC3339, b)
	return errA == nil && errB == nil && !ta.Before(tb)
}

func marshal(t *Table) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// FormatError reports a table whose format this build does not know.
type FormatError struct {
	Found string
	// Envelope is set when the bytes are a signed envelope (they have a
	// payloadType), which holds a table but is not one.
	Envelope bool
}

func (e *FormatError) Error() string {
	if e.Envelope {
		return "a signed envelope, not a bare decision table: get its table with policyc verify FILE --trust KEY -o table.json"
	}
	if e.Found == "" {
		return fmt.Sprintf("not a policyc decision table: no %q field (expected format %q)", "format", Format)
	}
	return fmt.Sprintf("unknown table format %q: this build reads %q; upgrade policyc or recompile the table", e.Found, Format)
}

// ErrNotCanonical reports bytes that decode but are not the canonical
// encoding; such a table was not written by policyc or was altered.
var ErrNotCanonical = errors.New("table is not in canonical form (altered after it was compiled?)")

// DigestError reports a table whose digest does not match its content.
type DigestError struct {
	Recorded, Computed string
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("table digest mismatch: recorded %s, content hashes to %s", e.Recorded, e.Computed)
}

// Decode parses canonical table bytes and checks the format, the digest and
// the structure. With DecodeDeferred it is the only way a table is read.
func Decode(b []byte) (*Table, error) {
	t, prove, err := DecodeDeferred(b)
	if err != nil {
		return nil, err
	}
	if err := prove(); err != nil {
		return nil, err
	}
	return t, nil
}

// DecodeDeferred is Decode in two parts. It parses b strictly and checks the
// format and the table's structure at once; prove then checks that b is the
// table's canonical encoding and carries its digest, about a third of
// Decode's time. A caller may prepare the table while prove runs on another
// core, but must use neither the table nor what it prepared until prove
// has returned nil, and must discard both if it returns an error.
func DecodeDeferred(b []byte) (t *Table, prove func() error, err error) {
	if err := jsonerr.CheckStart(b); err != nil {
		return nil, nil, err
	}
	// Parse reads b in place: a Decoder would first copy it into buffers
	// that double from 32 KiB. Strings are still copied out of b.
	t = new(Table)
	rest, err := json.Parse(b, t, json.DisallowUnknownFields)
	if err == nil && len(bytes.TrimSpace(rest)) > 0 {
		err = errors.New("data after the table")
	}
	if err != nil {
		// A table of another format may have fields this one lacks:
		// name the format rather than the field.
		var head struct {
			Format      string `json:"format"`
			PayloadType string `json:"payloadType"`
		}
		if json.Unmarshal(b, &head) == nil && head.Format != Format {
			return nil, nil, &FormatError{Found: head.Format, Envelope: head.Format == "" && head.PayloadType != ""}
		}
		return nil, nil, decodeError(b, err)
	}
	if t.Format != Format {
		return nil, nil, &FormatError{Found: t.Format}
	}
	if err := t.Check(); err != nil {
		return nil, nil, err
	}
	recorded := t.Digest
	prove = func() error {
		re, err := marshal(t)
		if err != nil {
			return err
		}
		if !bytes.Equal(re, b) {
			if bytes.Contains(b, []byte("\r\n")) {
				return fmt.Errorf("%w: its lines end in CRLF, as git's core.autocrlf or an editor may convert them; use the file as policyc wrote it (in git, mark it -text in .gitattributes)", ErrNotCanonical)
			}
			return ErrNotCanonical
		}
		// The digest covers the canonical table with the digest blanked.
		// The bytes are canonical, so the top-level digest is the one
		// place the text `\n  "digest": "` occurs (strings escape their
		// quotes).
		field := []byte("\n  \"digest\": \"" + recorded + "\"")
		i := bytes.Index(b, field)
		if i < 0 {
			return ErrNotCanonical
		}
		h := sha256.New()
		h.Write(b[:i])
		h.Write([]byte("\n  \"digest\": \"\""))
		h.Write(b[i+len(field):])
		if computed := "sha256:" + hex.EncodeToString(h.Sum(nil)); computed != recorded {
			return &DigestError{Recorded: recorded, Computed: computed}
		}
		return nil
	}
	return t, prove, nil
}

// decodeError words why b does not decode as a table: where the JSON
// breaks, or which field holds the wrong kind of value, without the Go
// type names and the copy of the input the decoder's errors carry. The
// standard library decoder, run again on the refused bytes only, gives the
// offset and the field.
func decodeError(b []byte, err error) error {
	if err.Error() == "data after the table" {
		return err
	}
	dec := stdjson.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var probe Table
	serr := dec.Decode(&probe)
	var syn *stdjson.SyntaxError
	var typ *stdjson.UnmarshalTypeError
	switch {
	case serr == nil:
		// The strict decoder refused what the standard one reads (a
		// duplicate key, say): keep its words, without the input.
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if i := strings.Index(msg, ": "); i >= 0 {
			msg = msg[:i]
		}
		return fmt.Errorf("not a decision table: %s", msg)
	case errors.Is(serr, io.EOF) || errors.Is(serr, io.ErrUnexpectedEOF):
		if len(bytes.TrimSpace(b)) == 0 {
			return errors.New("not a decision table: the file is empty")
		}
		return fmt.Errorf("not a decision table: the JSON ends early, at %s (a truncated file?)", lineCol(b, len(b)))
	case errors.As(serr, &syn):
		off := int(syn.Offset)
		if strings.HasPrefix(syn.Error(), "invalid character") && off > 0 {
			off-- // the offset is just after the character
		}
		return fmt.Errorf("not a decision table: not JSON: %s at %s", syn.Error(), lineCol(b, off))
	case errors.As(serr, &typ):
		where := "the file"
		if typ.Field != "" {
			where = fmt.Sprintf("field %q", typ.Field)
		}
		return fmt.Errorf("not a decision table: %s holds a JSON %s where the table has %s",
			where, typ.Value, jsonerr.KindOf(typ.Type))
	case strings.HasPrefix(serr.Error(), "json: unknown field "):
		return fmt.Errorf("not a decision table: %s", strings.TrimPrefix(serr.Error(), "json: "))
	}
	return fmt.Errorf("not a decision table: %s", strings.TrimPrefix(serr.Error(), "json: "))
}

// lineCol is the 1-based line and column (in characters) of offset off in b.
func lineCol(b []byte, off int) string {
	off = min(max(off, 0), len(b))
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	start := bytes.LastIndexByte(b[:off], '\n') + 1
	return fmt.Sprintf("line %d, column %d", line, utf8.RuneCount(b[start:off])+1)
}

// Check validates the structure of a table: effects, defaults, references
// to channels, scope names. Patterns are checked by the runtime when it
// compiles them.
func (t *Table) Check() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if t.Servers == nil {
		add("table has no servers object")
	}
	if t.Expires != "" {
		if _, err := time.Parse(time.RFC3339, t.Expires); err != nil {
			add("expires: %v", err)
		}
	}
	for i, it := range t.Items {
		if _, ok := ParseKind(it.Kind); !ok {
			add("items[%d]: unknown kind %q", i, it.Kind)
		}
		if _, ok := ParseEffect(it.Decision); !ok {
			add("items[%d]: unknown decision %q", i, it.Decision)
		}
		if it.Server == "" || it.Name == "" {
			add("items[%d]: an item needs a server and a name", i)
		}
		if it.InputSchemaDigest != "" && it.Kind != Tool.String() {
			add("items[%d]: an input-schema digest on a %s", i, it.Kind)
		}
		if i > 0 && !t.Items[i-1].Less(it) {
			add("items[%d]: items are not sorted by server, kind, name and principal, or %s %s %q is listed twice", i, it.Server, it.Kind, it.Name)
		}
		if it.Principal != "" && (i == 0 || t.Items[i-1].Server != it.Server || t.Items[i-1].Kind != it.Kind || t.Items[i-1].Name != it.Name) {
			add("items[%d]: %s %s %q for principal %q comes without the item's decision for everyone else", i, it.Server, it.Kind, it.Name, it.Principal)
		}
	}
	for name, c := range t.Channels {
		if c.Kind != ChannelWebhook && c.Kind != ChannelApprovalsPage {
			add("channel %s: unknown kind %q", name, c.Kind)
		}
	}
	checkAccess := func(where string, a *Access, base bool) {
		if a == nil {
			if base {
				add("%s: missing", where)
			}
			return
		}
		if a.Default != Allow.String() && a.Default != Deny.String() {
			add("%s: default %q is neither allow nor deny", where, a.Default)
		}
		if a.ApprovalTimeoutSeconds < 0 {
			add("%s: negative approval timeout", where)
		}
		if a.ApprovalChannel != "" {
			if _, ok := t.Channels[a.ApprovalChannel]; !ok {
				add("%s: approval channel %q is not in channels", where, a.ApprovalChannel)
			}
		}
		last := 0
		for i, r := range a.Rules {
			e, ok := ParseEffect(r.Effect)
			if !ok {
				add("%s: rule %d: unknown effect %q", where, i, r.Effect)
				continue
			}
			rank := int(e)
			if rank < last {
				add("%s: rule %d: rules are not ordered deny, approve, allow", where, i)
			}
			last = rank
			if r.Pattern == "" {
				add("%s: rule %d: empty pattern", where, i)
			}
		}
	}
	checkServer := func(where string, s Server, base bool) {
		checkAccess(where+".tool", s.Tool, base)
		checkAccess(where+".prompt", s.Prompt, base)
		checkAccess(where+".resource", s.Resource, base)
		if s.Prompt != nil && hasEffect(s.Prompt.Rules, Approve) || s.Resource != nil && hasEffect(s.Resource.Rules, Approve) {
			add("%s: approve rules on a prompt or resource: no approval hold exists on a fetch", where)
		}
		switch s.Pins {
		case "", PinsEnforce, PinsWarn, PinsOff:
		default:
			add("%s: pins %q is not enforce, warn or off", where, s.Pins)
		}
		if !base && (s.Pins != "" || s.Audit) {
			add("%s: pins or audit outside the base scope", where)
		}
		if s.UI != nil {
			if !base {
				add("%s: ui allowlist outside the base scope", where)
			}
			for _, p := range s.UI.AllowList {
				if !strings.HasPrefix(p, "ui://") {
					add("%s.ui: %q is not a ui:// URI", where, p)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.Servers)) {
		if name == AllServers {
			add("servers: %q is not a server name", name)
		}
		checkServer("servers."+name, t.Servers[name], true)
	}
	for i, sc := range t.Scopes {
		if !(sc.Name == "global" || strings.HasPrefix(sc.Name, "group:") || strings.HasPrefix(sc.Name, "principal:")) {
			add("scopes[%d]: unknown scope name %q", i, sc.Name)
		}
		for _, name := range slices.Sorted(maps.Keys(sc.Servers)) {
			checkServer(fmt.Sprintf("scopes[%d](%s).%s", i, sc.Name, name), sc.Servers[name], false)
		}
	}
	return errors.Join(errs...)
}

func hasEffect(rules []Rule, effect Effect) bool {
	for _, r := range rules {
		if r.Effect == effect.String() {
			return true
		}
	}
	return false
}
