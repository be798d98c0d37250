package decide

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/policyc/policyc/internal/fileio"
	"github.com/policyc/policyc/runtime/envelope"
	"github.com/policyc/policyc/runtime/table"
)

// The refusals of LoadVerified. Every refusal error matches exactly one of
// these with errors.Is; its message names what was refused and what to do.
var (
	// ErrUnsigned: a bare decision table where a signed envelope was
	// expected.
	ErrUnsigned = errors.New("unsigned table")
	// ErrBadSignature: the payload or a signature was altered, or the
	// envelope is malformed, truncated or has no signatures.
	ErrBadSignature = errors.New("bad signature")
	// ErrUntrusted: signed, but only by keys that are not trusted.
	ErrUntrusted = errors.New("untrusted signer")
	// ErrWrongType: the envelope's payloadType is not a policyc table.
	ErrWrongType = errors.New("wrong payload type")
	// ErrUnknownFormat: a table format (or a policyc payloadType version)
	// this build does not read. A *table.FormatError is also in the chain
	// when the table itself named the format.
	ErrUnknownFormat = errors.New("unknown table format")
	// ErrInvalidTable: a trusted key signed a payload that is not a valid
	// table of this format (not canonical, digest mismatch, bad structure
	// or pattern). Signed garbage is still garbage.
	ErrInvalidTable = errors.New("invalid table")
	// ErrExpired: the table's expiry has passed.
	ErrExpired = errors.New("expired table")
	// ErrRollback: the table's serial is older than the last one accepted
	// with the same state directory.
	ErrRollback = errors.New("rollback")
)

// refusal is a LoadVerified error: the sentinel it matches and the error
// that says why.
type refusal struct {
	kind error
	err  error
}

func (r *refusal) Error() string   { return r.err.Error() }
func (r *refusal) Unwrap() []error { return []error{r.kind, r.err} }

func refuse(kind, err error) error { return &refusal{kind: kind, err: err} }

func refusef(kind error, format string, args ...any) error {
	return &refusal{kind: kind, err: fmt.Errorf(format, args...)}
}

// ExpiredError details an ErrExpired refusal.
type ExpiredError struct {
	Expires, Now time.Time
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("table expired at %s (now %s): it must not be loaded any more; deploy a freshly signed table",
		e.Expires.UTC().Format(time.RFC3339), e.Now.UTC().Format(time.RFC3339))
}

// RollbackError details an ErrRollback refusal.
type RollbackError struct {
	// Serial is the refused table's serial; Last the last accepted one.
	Serial, Last uint64
	// State is the state file that recorded Last.
	State string
}

func (e *RollbackError) Error() string {
	return fmt.Sprintf("table serial %d is older than serial %d, the last accepted (recorded in %s): refusing a rollback to an older policy; deploy a table built from the current commit",
		e.Serial, e.Last, e.State) + WorkTreeHint(e.Serial, e.State)
}

// WorkTreeHint is what a rollback refusal of a table of serial adds when
// serial is 0: the serial of a build of a work tree with changes not
// committed, or of a policy outside git, which a developer trying a policy
// on their own machine meets at the second build. statePath, when not "",
// is the state file that recorded the last accepted table.
func WorkTreeHint(serial uint64, statePath string) string {
	switch {
	case serial != 0:
		return ""
	case statePath == "":
		return " (serial 0 is a build of uncommitted changes, or of a policy outside git: commit and compile --rev HEAD)"
	}
	return fmt.Sprintf(" (serial 0 is a build of uncommitted changes, or of a policy outside git: commit and compile --rev HEAD, or, to try a policy on this machine only, remove %s, which holds nothing else, and start the gateway again)", statePath)
}

// ExpiryText is how a refusal names the expiry exp, "" for none.
func ExpiryText(exp string) string {
	if exp == "" {
		return "no expiry"
	}
	return strconv.Quote(exp)
}

// VerifyOptions says whom to trust and where the gateway keeps its state.
type VerifyOptions struct {
	// Trusted are the public keys whose signature makes a table loadable.
	// It must not be empty.
	Trusted []ed25519.PublicKey
	// Now is the clock expiry is checked against; nil means time.Now.
	Now func() time.Time
	// StateDir, when set, is an existing directory where the serial and
	// digest of the last accepted table are kept (file StateFile), for
	// rollback protection. Empty means no rollback check: only for tools
	// that inspect a table, never for a gateway.
	StateDir string
	// ReadOnly checks the table against the state but records nothing:
	// for a check that must not change what the gateway will accept.
	ReadOnly bool
	// Accept, when set, is the caller's last word on the loaded table:
	// its error refuses the table, before anything is recorded. A gateway
	// passes the checks it makes of a table beyond verification (that it
	// can enforce it, that it may replace the serving one), so that a
	// table it refuses never advances the state. It runs before the
	// table's automata are built: Accept must not wait for Table.Ready.
	Accept func(*Table) error
}

// StateFile is the name of the file in VerifyOptions.StateDir that records
// the last accepted table.
const StateFile = "accepted-table.json"

// stateLockFile is the state directory's lock while a table is checked
// against the state and recorded.
const stateLockFile = "accepted-table.lock"

// Verified describes how a table passed verification.
type Verified struct {
	// KeyIDs are the trusted keys whose signatures verified, in signature
	// order.
	KeyIDs []string
	// Digest and Serial are the table's.
	Digest string
	Serial uint64
	// Expires is the table's expiry; zero when it has none.
	Expires time.Time
	// Payload is the table exactly as signed (canonical bytes).
	Payload []byte
	// LastSerial is the serial recorded in the state directory before
	// this table was accepted; HadState says whether there was one.
	LastSerial uint64
	HadState   bool
}

// LoadVerified is the only way a gateway loads a table. It takes the bytes
// of a DSSE envelope and checks, in this order, stopping at the first
// refusal:
//
//  1. the bytes are a DSSE envelope (a bare table is ErrUnsigned; bad JSON,
//     a truncated file, bad base64 or no signatures is ErrBadSignature);
//  2. the payloadType is table.PayloadType (another policyc table version
//     is ErrUnknownFormat, anything else ErrWrongType);
//  3. at least one signature verifies over PAE(payloadType, payload) with a
//     trusted key (ErrBadSignature when a signature that claims a trusted
//     key fails, ErrUntrusted when every signature names another key). The
//     keyid is only a hint; trust comes from verifying.
//  4. only then is the payload decoded, strictly (ErrUnknownFormat for a
//     format this build does not read, ErrInvalidTable for anything else);
//  5. the expiry, against opts.Now: a table is refused from its expiry
//     instant on (ErrExpired);
//  6. with a StateDir, the serial must be at least the last accepted one
//     (ErrRollback). An equal serial is accepted for the same content: a
//     restart reloads the same table, and a table re-signed by another key
//     or with a later expiry keeps its serial; other content, or an earlier
//     expiry or none, at the same serial is ErrRollback too. Serials must
//     therefore grow with every commit CI signs (see docs/git.md);
//  7. the table is loaded (ErrInvalidTable when a pattern does not parse).
//     The load is built while step 4's proof that the payload is canonical
//     and carries its digest runs on another core; it is refused as step 4
//     would, and step 7 reports its own error only after steps 5 and 6;
//  8. opts.Accept, when set, is asked, and its error refuses the table;
//  9. with a StateDir, unless ReadOnly, the serial and digest are
//     recorded, atomically, when they differ from the recorded ones, and
//     only after every check passed.
//
// Errors other than refusals (an unreadable or corrupt state file, a
// missing state directory, no trusted keys) are returned as they are; they
// too leave nothing loaded.
func LoadVerified(envelopeBytes []byte, opts VerifyOptions) (*Table, *Verified, error) {
	if len(opts.Trusted) == 0 {
		return nil, nil, errors.New("no trusted keys: a table is loaded only when a trusted key signed it; give the public key(s) CI signs with")
	}
	env, err := envelope.Parse(envelopeBytes)
	if err != nil {
		if errors.Is(err, envelope.ErrNotEnvelope) && looksLikeTable(envelopeBytes) {
			return nil, nil, refusef(ErrUnsigned, "this is a bare decision table, not a signed envelope: a gateway loads only tables signed by a trusted key (sign it with 'policyc sign')")
		}
		return nil, nil, refuse(ErrBadSignature, err)
	}
	if env.PayloadType != table.PayloadType {
		if strings.HasPrefix(env.PayloadType, payloadTypePrefix) {
			return nil, nil, refusef(ErrUnknownFormat, "payloadType %q is a policyc table format this build does not read (it reads %q); upgrade policyc or sign a table this version compiled", env.PayloadType, table.PayloadType)
		}
		return nil, nil, refusef(ErrWrongType, "payloadType %q is not a policyc decision table (expected %q): the envelope signs something else", env.PayloadType, table.PayloadType)
	}
	keyIDs, err := env.Verify(opts.Trusted)
	if err != nil {
		var untrusted *envelope.UntrustedError
		if errors.As(err, &untrusted) {
			return nil, nil, refuse(ErrUntrusted, err)
		}
		return nil, nil, refuse(ErrBadSignature, err)
	}
	src, prove, err := table.DecodeDeferred(env.Payload)
	if err != nil {
		var fe *table.FormatError
		if errors.As(err, &fe) && fe.Found != "" {
			return nil, nil, refuse(ErrUnknownFormat, err)
		}
		return nil, nil, refuse(ErrInvalidTable, fmt.Errorf("the signed payload is not a valid table: %w", err))
	}
	// The proof that the payload is the table's canonical encoding, with
	// its digest, runs on another core while the table is loaded; nothing
	// loaded is used, or returned, unless it succeeds.
	proof := make(chan error, 1)
	go func() { proof <- prove() }()
	t, loadErr := load(src)
	if err := <-proof; err != nil {
		return nil, nil, refuse(ErrInvalidTable, fmt.Errorf("the signed payload is not a valid table: %w", err))
	}
	v := &Verified{KeyIDs: keyIDs, Digest: src.Digest, Serial: src.Serial, Payload: env.Payload}
	if src.Expires != "" {
		// Decode's Check has already parsed it.
		v.Expires, _ = time.Parse(time.RFC3339, src.Expires)
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		if t := now(); !t.Before(v.Expires) {
			return nil, nil, refuse(ErrExpired, &ExpiredError{Expires: v.Expires, Now: t})
		}
	}
	var statePath string
	var last *acceptedState
	if opts.StateDir != "" {
		statePath = filepath.Join(opts.StateDir, StateFile)
		if st, err := os.Stat(opts.StateDir); err == nil && st.IsDir() && !opts.ReadOnly {
			// From reading the state to recording the table, no other
			// process may record one: two interleaved could leave the
			// older serial recorded. (A missing directory is readState's
			// to report.)
			unlock, err := lockState(opts.StateDir)
			if err != nil {
				return nil, nil, err
			}
			defer unlock()
		}
		if last, err = readState(opts.StateDir, statePath); err != nil {
			return nil, nil, err
		}
		if last != nil {
			v.LastSerial, v.HadState = last.Serial, true
			if src.Serial < last.Serial {
				return nil, nil, refuse(ErrRollback, &RollbackError{Serial: src.Serial, Last: last.Serial, State: statePath})
			}
			if src.Serial == last.Serial && src.Digest != last.Digest && last.Content != "" {
				// The same serial is the same commit: the same content,
				// re-signed at most with a later expiry (a renewal).
				switch {
				case table.ContentDigest(src) != last.Content:
					return nil, nil, refusef(ErrRollback, "table serial %d is the last accepted serial (recorded in %s) but its content differs: a changed table must carry a newer serial%s", src.Serial, statePath, WorkTreeHint(src.Serial, statePath))
				case !table.ExtendsExpiry(src.Expires, last.Expires):
					return nil, nil, refusef(ErrRollback, "table serial %d is the last accepted table (recorded in %s) re-signed with %s, which does not extend the accepted one's (%s): a renewal must extend it", src.Serial, statePath, ExpiryText(src.Expires), ExpiryText(last.Expires))
				}
			}
		}
	}
	if loadErr != nil {
		return nil, nil, refuse(ErrInvalidTable, loadErr)
	}
	if opts.Accept != nil {
		if err := opts.Accept(t); err != nil {
			return nil, nil, err
		}
	}
	// The state is written when it changes, and when it was recorded
	// before content was (so that it checks content from then on).
	if statePath != "" && !opts.ReadOnly && (last == nil || last.Serial != src.Serial || last.Digest != src.Digest || last.Content == "") {
		if err := writeState(statePath, acceptedState{Digest: src.Digest, Serial: src.Serial, Content: table.ContentDigest(src), Expires: src.Expires}); err != nil {
			return nil, nil, err
		}
	}
	go t.buildAutomata() // as Load does
	return t, v, nil
}

// payloadTypePrefix is shared by every version of the table payloadType.
var payloadTypePrefix = table.PayloadType[:strings.Index(table.PayloadType, ".table.")+len(".table.")]

// looksLikeTable reports whether b is a JSON object with a "format" field,
// as every decision table has.
func looksLikeTable(b []byte) bool {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(b, &head); err != nil {
		return false
	}
	_, ok := head["format"]
	return ok
}

// acceptedState is the content of the state file.
type acceptedState struct {
	// Content is the table's table.ContentDigest and Expires its expiry,
	// so that a table at the same serial can be told a renewal (same
	// content, a later expiry) from a change. Missing in state written
	// before they were recorded: such a state checks the serial only.
	// Fields are in key order, so the file reads sorted.
	Content string `json:"content,omitempty"`
	Digest  string `json:"digest"`
	Expires string `json:"expires,omitempty"`
	Serial  uint64 `json:"serial"`
}

// readState returns the recorded state, or nil when none was recorded yet.
// The directory must exist: a gateway pointed at a mistyped directory
// would otherwise start without rollback protection and never say so.
func readState(dir, path string) (*acceptedState, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w (create it; it keeps the serial of the last accepted table)", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("state directory %s is not a directory", dir)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var s acceptedState
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil || dec.More() || !strings.HasPrefix(s.Digest, "sha256:") {
		return nil, fmt.Errorf("state file %s is corrupt (expected {\"content\": \"sha256:...\", \"digest\": \"sha256:...\", \"serial\": N}): refusing to load without knowing the last accepted serial; restore the file, or remove it to accept any serial again", path)
	}
	return &s, nil
}

func writeState(path string, s acceptedState) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := fileio.WriteAtomic(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("record the accepted table: %w", err)
	}
	return nil
}
