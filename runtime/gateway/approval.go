package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ApprovalGate decides tool calls the table holds for approval ("approve").
// The gateway lists such tools; on a call it builds a HoldRequest and waits
// for Hold, whose context ends at the approval timeout. Only an approved
// verdict lets the call run, and then with exactly req.Arguments: the call
// that was reviewed is the call that runs, once. A denial, a timeout or an
// error reaches the client as a tool execution error (isError) telling the
// agent not to retry or route around it (except Verdict.Retry and
// ErrUnavailable, after which a retry is what it should do).
//
// An implementation must be safe for concurrent use. It owns what the
// design asks of approvals beyond this: reaching a human through
// req.Channel, showing a safe preview of the arguments, binding an approval
// to req.Fingerprint, consuming an "approve once" with exactly one call, and
// folding identical pending requests (same principal, server, tool and
// fingerprint) into one.
type ApprovalGate interface {
	Hold(ctx context.Context, req *HoldRequest) (Verdict, error)
}

// HoldRequest is one tool call held for approval.
type HoldRequest struct {
	// Principal asked; Server and Tool are the upstream's names (not the
	// namespaced one the client used).
	Principal, Server, Tool string
	// Arguments are the call's arguments in canonical JSON (CanonicalJSON):
	// the bytes forwarded if approved. They may hold secrets; the gateway
	// never logs them.
	Arguments []byte
	// Fingerprint is Fingerprint(Arguments).
	Fingerprint string
	// Origin is the file:line of the rule that put the tool on approval.
	Origin string
	// Timeout is how long the request lives, for a human to decide it:
	// the shortest approval_timeout_seconds of every scope that applies.
	Timeout time.Duration
	// HoldFor is how long this call is held in place (HoldOptions); when
	// it ends with the request still pending, the gate answers
	// OutcomePending and the request goes on.
	HoldFor time.Duration
	// Channel is the approval channel the table names for the server.
	Channel string
	// TableDigest and TableSerial identify the deciding table.
	TableDigest string
	TableSerial uint64
	// Client names the agent's software (name and version, as its
	// initialize or request metadata said) and Session its MCP session id
	// (empty over stdio), for the approver.
	Client, Session string
	// Progress, when set, tells the waiting client that its call is still
	// held (it asked for progress); a gate may call it at a steady
	// interval. It never blocks for long.
	Progress func(message string)
	// Recheck reports whether the call may still run under the table
	// serving now (a reload may have denied it while it was held): a gate
	// calls it just before it approves the call, and an error means the
	// call must not run. The gateway checks again after Hold returns.
	Recheck func() error
}

// ErrUnavailable, matched by an error of Hold (errors.Is), says the gate
// cannot hold calls for now (its state database is unreachable) and will
// again by itself: the agent is told it may repeat the call later.
var ErrUnavailable = errors.New("approvals are unavailable for now")

// Verdict is the gate's answer.
type Verdict struct {
	Approved bool
	// Outcome says why a call that is not approved does not run. The zero
	// value is a denial by a human.
	Outcome Outcome
	// RequestID names the approval request the call was held for; the
	// agent is told it, to quote to its user. URL links to the request for
	// an approver. Either may be empty.
	RequestID, URL string
	// By is who decided, when a human did.
	By string
	// Expires is when the request expires undecided; set with
	// OutcomePending.
	Expires time.Time
	// Reason, when set, is shown to the agent: the approver's reason for a
	// denial, or why an approved call could not run (never secrets).
	Reason string
	// Retry, with OutcomeTimedOut and a Reason, says the request outlives
	// the hold (its state is shared with other gateways, where it stays
	// pending): the agent is told to repeat the call once, which joins the
	// request or uses its approval.
	Retry bool
}

// Outcome is why a held call that was not approved does not run.
type Outcome uint8

// Outcomes.
const (
	// OutcomeDenied: a human denied the call.
	OutcomeDenied Outcome = iota
	// OutcomeTimedOut: no one decided in time (as is an error wrapping
	// context.DeadlineExceeded). With a Reason, the hold ended undecided
	// before its timeout, for that reason (the gateway stopped).
	OutcomeTimedOut
	// OutcomeDuplicate: the call was identical to others held for the same
	// request, which was approved once; the approval went to one of them,
	// which ran, and not to this one.
	OutcomeDuplicate
	// OutcomeNotRun: approved, but the approval could not be used (the
	// serving table no longer holds or allows the call, the approval was
	// revoked or lapsed, its use could not be recorded).
	OutcomeNotRun
	// OutcomePending: the call's hold in place ended with its request
	// still pending: the agent is told to wait for it (the wait tool)
	// and then to repeat the call.
	OutcomePending
	// OutcomeRefused: no request was made: the principal has too many
	// pending (Reason says so).
	OutcomeRefused
)

// ConsentGate grants reads of ui:// resources (MCP Apps, SEP-1865) that the
// table admits: allowlisted for the server, with a consent channel that
// reaches a human. Without a ConsentGate every ui:// resource is denied,
// listed nowhere and answered as absent: consent that cannot be asked for
// does not exist.
type ConsentGate interface {
	Consent(ctx context.Context, req *ConsentRequest) (bool, error)
}

// ConsentRequest is one ui:// read that needs the principal's consent.
type ConsentRequest struct {
	Principal, Server, URI string
	// Channel is the table's consent channel for the server.
	Channel     string
	TableDigest string
	TableSerial uint64
	// Client and Session say which agent asked, as in HoldRequest.
	Client, Session string
}

// maxDepth bounds the nesting CanonicalJSON accepts.
const maxDepth = 128

// CanonicalJSON returns the canonical form of a JSON object: object keys
// sorted, no insignificant whitespace, strings escaped one way (no HTML
// escaping), numbers as written. It refuses anything that is not exactly one
// JSON object, and objects with a repeated key: two readers could disagree
// on which value counts, and the approver must see what runs.
func CanonicalJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if tok != json.Delim('{') {
		return nil, errors.New("arguments must be a JSON object")
	}
	v, err := readObject(dec, 1)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("arguments: unexpected data after the object")
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

func readValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	switch tok {
	case json.Delim('{'):
		return readObject(dec, depth+1)
	case json.Delim('['):
		if depth+1 > maxDepth {
			return nil, fmt.Errorf("arguments nest deeper than %d levels", maxDepth)
		}
		list := []any{}
		for dec.More() {
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
		}
		return list, nil
	}
	return tok, nil
}

func readObject(dec *json.Decoder, depth int) (map[string]any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("arguments nest deeper than %d levels", maxDepth)
	}
	obj := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("arguments are not valid JSON: an object key is not a string")
		}
		if _, dup := obj[key]; dup {
			return nil, fmt.Errorf("arguments repeat the key %q; give each key once", key)
		}
		v, err := readValue(dec, depth)
		if err != nil {
			return nil, err
		}
		obj[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	return obj, nil
}

// Fingerprint is "sha256:" and the hex SHA-256 of canonical arguments: what
// an approval is bound to.
func Fingerprint(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// heldCalls ends the holds of an HTTP session's calls that no one can
// receive the answer to any more: the client deleted the session, or the
// POST that carried the call ended before its answer (the client went
// away; the gateway keeps no events to resume a stream with). The SDK
// closes a session only once its calls are answered, and a held call waits
// for a human: without this, a DELETE would wait as long as the hold, and
// an abandoned session would stay open as long.
type heldCalls struct {
	mu    sync.Mutex
	holds map[string]map[*heldCall]bool // session id → its holds
	// ended are the sessions being deleted, with their principal: a call
	// taken before the DELETE that reaches its hold after is ended at once.
	ended map[string]string
	// posts holds the context of each session POST being served, by the
	// key the front gives it in the postHeader header.
	posts sync.Map
	seq   atomic.Uint64
}

type heldCall struct {
	principal string
	end       context.CancelFunc
}

// postHeader is the request header in which the HTTP front tells a call's
// handler which POST carried it. The front sets it on every POST,
// replacing any value a client sent.
const postHeader = "Policyc-Gateway-Post"

// servingPost records that POST request r of a session is being served
// until the returned func is called, and names it in its postHeader.
func (h *heldCalls) servingPost(r *http.Request) (done func()) {
	key := strconv.FormatUint(h.seq.Add(1), 10)
	r.Header.Set(postHeader, key)
	h.posts.Store(key, r.Context())
	return func() { h.posts.Delete(key) }
}

// watchPost calls gone once the POST that carried request r ends before
// stop is called, or at once when it has already ended; a request that no
// session POST carried is not watched.
func (h *heldCalls) watchPost(r *mcp.CallToolRequest, gone func()) (stop func()) {
	if r.Extra == nil || r.Extra.Header == nil || r.Extra.Header.Get(postHeader) == "" {
		return func() {}
	}
	ctx, ok := h.posts.Load(r.Extra.Header.Get(postHeader))
	if !ok {
		gone()
		return func() {}
	}
	unwatch := context.AfterFunc(ctx.(context.Context), gone)
	return func() { unwatch() }
}

// add records a hold of session for principal, ended by end; the returned
// func removes it.
func (h *heldCalls) add(session, principal string, end context.CancelFunc) (remove func()) {
	c := &heldCall{principal, end}
	h.mu.Lock()
	defer h.mu.Unlock()
	if p, ok := h.ended[session]; ok && p == principal {
		end()
	}
	if h.holds == nil {
		h.holds = map[string]map[*heldCall]bool{}
	}
	if h.holds[session] == nil {
		h.holds[session] = map[*heldCall]bool{}
	}
	h.holds[session][c] = true
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.holds[session], c)
		if len(h.holds[session]) == 0 {
			delete(h.holds, session)
		}
	}
}

// forget forgets that session was ended, once it is closed.
func (h *heldCalls) forget(session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.ended, session)
}

// end ends the holds of session that principal's calls made, and those
// they make until forget: only the session's own principal can end them,
// as only it can delete the session.
func (h *heldCalls) end(session, principal string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended == nil {
		h.ended = map[string]string{}
	}
	h.ended[session] = principal
	for c := range h.holds[session] {
		if c.principal == principal {
			c.end()
		}
	}
}
