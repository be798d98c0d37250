// Package approval is the gateway's approval gate: it holds tool calls the
// decision table puts on approval until a human decides, bound to the
// exact arguments, and asks for consent to ui:// resources (SEP-1865).
//
// A held call waits in place. Its request is bound to a fingerprint of the
// canonical arguments (kept in memory only) and shows a safe Preview of
// them (the arguments themselves are never stored), reaches a human through the server's channel (a
// webhook, or the approvals page of the admin listener) and ends exactly
// once: approved, denied or expired. Identical pending requests (same
// principal, server, tool and fingerprint) fold into one, so a retry loop
// makes one queue entry. An approval once is consumed by exactly one call;
// an approval for a duration lets every later call of the tool by the
// principal pass until it ends or is revoked. Every change is on disk
// before it takes effect, and in an audit log of who decided what, when
// and from where.
//
// It must never approve by default: a channel that fails to deliver, a
// store that cannot record, a gateway that restarts, all leave the call
// not run.
package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/policyc/policyc/runtime/principal"
)

// Config configures a Gate.
type Config struct {
	// StateDir is the gateway's state directory; the store and the audit
	// log live there. Required unless Store is set.
	StateDir string
	// Store, when set, keeps the requests and the audit log instead of
	// files in StateDir: a *PostgresStore, shared by gateway replicas.
	// Requests pending when a gateway stops then stay pending (another
	// replica, or the agent's retry, carries them on). The gate does not
	// close it.
	Store Store
	// Servers holds per-server options, by the server's name in the table.
	Servers map[string]ServerOptions
	// Webhook configures delivery to webhook channels. Without a Secret no
	// webhook channel works, and the boot check says so.
	Webhook WebhookOptions
	// PageURL is the approvals page as approvers reach it (the admin
	// listener's address, or the URL of a proxy in front of it), e.g.
	// "https://gateway.example.com:8443". Links to requests are built from
	// it; empty means requests carry no link.
	PageURL string
	// PageServed reports that the admin listener serves the approvals
	// page, so approvals_page channels reach someone.
	PageServed bool
	// OnceWindow is how long an approval once may wait to be used, counted
	// from the decision: by the call held for it, or by the agent's retry
	// of the same call when none was held any more. It lasts at least
	// until the request would have expired. Default 5m.
	OnceWindow time.Duration
	// MaxPending is the most requests one principal may have pending at
	// once; a call that would make another is refused. Default 20.
	MaxPending int
	// ProgressInterval is how often a held call whose client sent a
	// progress token is told it still waits. Default 15s.
	ProgressInterval time.Duration
	// ConsentWait is how long a ui:// read may wait for consent. Default
	// 60s.
	ConsentWait time.Duration
	// Retention is how long a finished request stays in the store (the
	// audit log keeps it for good). Default 30 days.
	Retention time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives operational messages (deliveries, failures). Nil
	// discards them.
	Logger *slog.Logger
	// Channels resolves a channel name for callers that pass only the
	// name (see Call.Channel).
	Channels func(name string) (Channel, bool)
}

// ServerOptions are one server's approval options.
type ServerOptions struct {
	// NoPreview turns the preview off: approvers see the tool name only.
	NoPreview bool
	// MaxDuration caps how long an approval for this server may last:
	// "once" (nothing is remembered), "1h", "8h" or "7d". Empty means 7d.
	MaxDuration string
}

// Channel is how a request reaches a human: the table's channel.
type Channel struct {
	Name string
	// Kind is "webhook" or "approvals_page".
	Kind string
	// URL is a webhook's.
	URL string
}

// Channel kinds, as the table names them.
const (
	ChannelWebhook = "webhook"
	ChannelPage    = "approvals_page"
)

// Call is one tool call to hold for approval.
type Call struct {
	// Principal asked; Server and Tool are the upstream's own names.
	Principal, Server, Tool string
	// Arguments are the call's arguments as canonical JSON: only their
	// fingerprint and preview are kept.
	Arguments []byte
	// Origin is the file:line of the rule that put the tool on approval.
	Origin string
	// Timeout is how long the request the call makes lives: how long a
	// human has to decide it.
	Timeout time.Duration
	// HoldFor is how long the call itself is held in place; when it ends
	// with the request still pending, the call is answered AnswerPending
	// and the request goes on. Zero holds it until the request ends (or
	// the call's context does).
	HoldFor time.Duration
	// Channel is the server's approval channel; when only its Name is
	// set, Config.Channels resolves it.
	Channel Channel
	// Client and Session say which agent asked, for the approver.
	Client, Session string
	// TableSerial and TableDigest identify the table that held the call.
	TableSerial uint64
	TableDigest string
	// Progress, when set, is told at a steady interval that the call still
	// waits (the client sent a progress token).
	Progress func(message string)
	// Recheck, when set, is asked just before an approved call is
	// released: an error (the serving table no longer holds or allows the
	// call) means it does not run.
	Recheck func() error
}

// Answer is what became of a held call.
type Answer uint8

// Answers.
const (
	// AnswerRun: approved; dispatch the call now, with exactly the
	// arguments that were reviewed.
	AnswerRun Answer = iota + 1
	// AnswerDenied: a human denied it.
	AnswerDenied
	// AnswerTimedOut: no one decided in time.
	AnswerTimedOut
	// AnswerDuplicate: the call was folded into a request that was
	// approved once, and the approval went to another call held for the
	// same request; this one does not run.
	AnswerDuplicate
	// AnswerNotRun: approved, but the approval could not be used: the
	// table no longer holds the call, the approval lapsed or was revoked
	// before the call could run, or the store could not record its use.
	AnswerNotRun
	// AnswerPending: the call's hold in place ended and its request is
	// still pending: the call did not run, and the agent may wait for
	// the decision and then repeat the call (Gate.Await).
	AnswerPending
	// AnswerRefused: the call made no request: its principal has
	// Config.MaxPending requests pending already.
	AnswerRefused
)

var answerNames = [...]string{"", "run", "denied", "timed out", "duplicate", "not run", "pending", "refused"}

func (a Answer) String() string {
	if int(a) < len(answerNames) {
		return answerNames[a]
	}
	return fmt.Sprintf("answer(%d)", int(a))
}

// Outcome is a held call's answer and what the agent may be told about it.
type Outcome struct {
	Answer Answer
	// RequestID is the request the call was held for (or, for a call a
	// duration approval let through, the request that granted it).
	RequestID string
	// URL links to the request on the approvals page, when known.
	URL string
	// By is the approver; For the approval's duration.
	By, For string
	// Reason is the approver's reason for a denial, or why an approved
	// call did not run.
	Reason string
	// Expires is when the request expires undecided.
	Expires time.Time
}

// Errors of Decide and Revoke. The admin API answers them with 404, 409,
// 403 and 400.
var (
	ErrNotFound = errors.New("no such request")
	ErrDecided  = errors.New("already decided")
	ErrExpired  = errors.New("expired")
	ErrSelf     = errors.New("a principal cannot decide its own request")
	ErrInvalid  = errors.New("invalid decision")
)

// refusal is an error of Decide or Revoke: its message says what and why,
// and errors.Is matches its kind (ErrNotFound, ...).
type refusal struct {
	kind error
	msg  string
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.kind }

func refuse(kind error, format string, args ...any) error {
	return &refusal{kind, fmt.Sprintf(format, args...)}
}

// Approver is who decides, and from where.
type Approver struct {
	// Name is the approver's name (its admin token's).
	Name string
	// From is where the decision came from: "page" or "api" and the
	// remote address.
	From string
}

// Gate is the approval gate. It is safe for concurrent use.
type Gate struct {
	cfg    Config
	now    func() time.Time
	logger *slog.Logger
	store  Store
	// pg is the shared store, when Config.Store is one.
	pg *PostgresStore

	mu      sync.Mutex
	reqs    map[string]*entry
	pending map[foldKey]*entry
	// ready holds the requests approved once whose approval no held call
	// took: the next identical call uses it.
	ready    map[foldKey]*entry
	grants   map[grantKey][]*entry
	closed   bool
	notified chan struct{} // closed and replaced on every change
	// nextPrune is when pruneLocked next looks for requests past their
	// retention.
	nextPrune time.Time
	// awaiting counts the calls waiting in Await for a change.
	awaiting atomic.Int32

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// closing is set by the first Close, which closes closeDone once it
	// has finished, with closeErr: the others wait on the channel (a
	// channel, not a sync.Once, so that a synctest bubble sees them
	// blocked).
	closing   atomic.Bool
	closeDone chan struct{}
	closeErr  error
}

// foldKey is what makes two pending requests the same.
type foldKey struct {
	kind                               Kind
	principal, server, name, fingerprt string
}

// grantKey is what a remembered approval covers: a tool of a server for a
// principal, or one ui:// resource.
type grantKey struct {
	kind                    Kind
	principal, server, name string
}

// entry is a request and the calls held for it.
type entry struct {
	r       Request
	waiters []*waiter
	// chosen is the call an approval once went to, until it runs.
	chosen *waiter
	timer  *time.Timer
}

// foldKey is the key of the calls the request of e folds.
func (e *entry) foldKey() foldKey {
	k := e.grantKey()
	return foldKey{k.kind, k.principal, k.server, k.name, e.r.Fingerprint}
}

// onceDeadline is when an approval once of e lapses unused.
func (g *Gate) onceDeadline(e *entry) time.Time {
	d := e.r.Decision.At.Add(g.cfg.OnceWindow)
	if e.r.Expires.After(d) {
		return e.r.Expires
	}
	return d
}

type waiter struct {
	sig chan signal // buffered: one signal per waiter, ever
	ctx context.Context
	// report, under Gate.mu, is told the call's outcome when it was held
	// at a decision (Decide set it).
	report *heldReport
}

// HeldCall says what became of calls held for a request when it was
// decided: how many of them had Answer, for Reason.
type HeldCall struct {
	Count  int    `json:"count"`
	Answer string `json:"answer"` // an Answer's String: "run", "not run", "denied", ...
	Reason string `json:"reason,omitempty"`
}

// heldReport gathers the outcomes of the calls held at one decision.
type heldReport struct {
	mu    sync.Mutex
	left  int // calls not yet answered
	done  chan struct{}
	calls []HeldCall
}

func newHeldReport(n int) *heldReport {
	r := &heldReport{left: n, done: make(chan struct{})}
	if n == 0 {
		close(r.done)
	}
	return r
}

func (r *heldReport) add(o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left == 0 {
		return
	}
	i := slices.IndexFunc(r.calls, func(c HeldCall) bool { return c.Answer == o.Answer.String() && c.Reason == o.Reason })
	if i < 0 {
		r.calls = append(r.calls, HeldCall{Answer: o.Answer.String(), Reason: o.Reason})
		i = len(r.calls) - 1
	}
	r.calls[i].Count++
	if r.left--; r.left == 0 {
		close(r.done)
	}
}

// result is what the calls were answered so far, and how many were not
// answered yet (as an entry with Answer "pending").
func (r *heldReport) result() []HeldCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.calls)
	if r.left > 0 {
		out = append(out, HeldCall{Count: r.left, Answer: "pending"})
	}
	return out
}

type signal struct {
	kind   sigKind
	reason string
}

type sigKind uint8

const (
	sigOnce sigKind = iota + 1
	sigGrant
	sigDeny
	sigExpired
	sigDuplicate
	sigNotRun
)

// Defaults.
const (
	defaultOnceWindow       = 5 * time.Minute
	defaultMaxPending       = 20
	defaultProgressInterval = 15 * time.Second
	defaultConsentWait      = 60 * time.Second
	defaultRetention        = 30 * 24 * time.Hour
)

// Open opens the store in cfg.StateDir and returns the gate. Requests that
// were pending when the gateway stopped end as expired (their held calls
// ended with it), approvals once that had not run end unused, and
// remembered approvals and consents stand as they were.
func Open(cfg Config) (*Gate, error) {
	if cfg.OnceWindow <= 0 {
		cfg.OnceWindow = defaultOnceWindow
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = defaultProgressInterval
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = defaultMaxPending
	}
	if cfg.ConsentWait <= 0 {
		cfg.ConsentWait = defaultConsentWait
	}
	if cfg.Retention <= 0 {
		cfg.Retention = defaultRetention
	}
	cfg.PageURL = strings.TrimSuffix(cfg.PageURL, "/")
	for name, o := range cfg.Servers {
		if o.MaxDuration != "" {
			if _, err := DurationOf(o.MaxDuration); err != nil {
				return nil, fmt.Errorf("server %s: longest approval: %v", name, err)
			}
		}
	}
	if err := cfg.Webhook.check(); err != nil {
		return nil, err
	}
	g := &Gate{cfg: cfg, now: cfg.Now, logger: cfg.Logger, reqs: map[string]*entry{}, pending: map[foldKey]*entry{}, ready: map[foldKey]*entry{}, closeDone: make(chan struct{}),
		grants: map[grantKey][]*entry{}, notified: make(chan struct{})}
	if g.now == nil {
		g.now = time.Now
	}
	if g.logger == nil {
		g.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Store != nil {
		return g.openShared(cfg.Store)
	}
	s, stored, torn, err := openStore(cfg.StateDir, g.logger)
	if err != nil {
		return nil, err
	}
	if torn != "" {
		g.logger.Warn(torn)
	}
	g.store = s
	now := g.now()
	var keep []*Request
	var events []*Event
	for _, r := range stored {
		// A request's fingerprint is never stored, so a request cannot
		// be matched to its call after a restart: what was pending ends,
		// and an approval once that no call used lapses.
		switch {
		case r.Status == Pending:
			r.Status, r.Ended, r.End = Expired, now, "the gateway stopped while the request was pending"
			events = append(events, r.event(now, "expired", Approver{}, r.End))
		case r.unused():
			r.Ran = "not run: the gateway stopped before a call used the approval"
			events = append(events, r.event(now, "not_run", Approver{}, r.Ran))
		}
		if g.retained(r, now) {
			keep = append(keep, r)
		}
	}
	if err := s.compact(keep); err != nil {
		s.close()
		return nil, err
	}
	for _, ev := range events {
		if err := s.logEvent(ev); err != nil {
			s.close()
			return nil, err
		}
	}
	for _, r := range keep {
		e := &entry{r: *r}
		g.reqs[r.ID] = e
		if r.Active(now) {
			k := e.grantKey()
			g.grants[k] = append(g.grants[k], e)
		}
	}
	g.nextPrune = now.Add(pruneEvery)
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g, nil
}

// openShared opens the gate on a store shared by replicas: its requests
// stand as they are (a pending one may still be held on another replica,
// or retried), and changes other replicas make are applied as they come.
func (g *Gate) openShared(st Store) (*Gate, error) {
	pg, ok := st.(*PostgresStore)
	if !ok {
		return nil, fmt.Errorf("approval store %T is not one the gate can share", st)
	}
	g.store, g.pg = st, pg
	now := g.now()
	reqs, err := pg.load(g.cfg.Retention)
	if err != nil {
		return nil, err
	}
	g.nextPrune = now.Add(pruneEvery)
	g.mu.Lock()
	for _, r := range reqs {
		g.installLocked(r)
	}
	g.mu.Unlock()
	g.ctx, g.cancel = context.WithCancel(context.Background())
	pg.watch(g.applyRemote)
	return g, nil
}

// pruneEvery is how often, at most, a running gate lets go of the
// requests past their retention. It looks as requests are made (and, on a
// shared store, as other replicas' requests arrive): a gate that makes
// none keeps what it has, and grows no more.
const pruneEvery = time.Hour

// retained reports whether the gate keeps r at now: pending, in force, an
// approval once no call used yet, or finished less than Config.Retention
// ago. The audit log keeps the rest.
func (g *Gate) retained(r *Request, now time.Time) bool {
	return r.Status == Pending || r.Active(now) || r.unused() || now.Sub(r.finished()) < g.cfg.Retention
}

// unused reports an approval once that no call used, nor was it recorded
// as lapsed.
func (r *Request) unused() bool {
	return r.Status == Approved && r.Decision != nil && r.Decision.For == ForOnce && r.Ran == ""
}

// pruneLocked lets go of the requests past their retention, in memory and
// in the store, once every pruneEvery at most: without it a gateway that
// runs for months would keep every request made since it started. A
// request some call still waits on stays whatever its age (one pending,
// or an approval once its call has yet to use, is retained anyway). A
// store that cannot drop them is logged; the next look tries again, and a
// restart drops them too.
func (g *Gate) pruneLocked(now time.Time) {
	if now.Before(g.nextPrune) {
		return
	}
	g.nextPrune = now.Add(pruneEvery)
	keep := make([]*Request, 0, len(g.reqs))
	for id, e := range g.reqs {
		if g.retained(&e.r, now) || len(e.waiters) > 0 {
			keep = append(keep, &e.r)
			continue
		}
		delete(g.reqs, id)
	}
	for k := range g.grants {
		g.activeGrantLocked(k, now) // drops the grants no longer in force
	}
	if err := g.store.prune(keep, g.cfg.Retention); err != nil {
		g.logger.Warn("dropping the approval requests past their retention from the store failed; the next try is in an hour", "error", err.Error())
	}
}

// finished is when a request stopped being pending (or was decided).
func (r *Request) finished() time.Time {
	t := r.Ended
	if d := r.Decision; d != nil {
		if d.At.After(t) {
			t = d.At
		}
		if d.Revoked != nil && d.Revoked.At.After(t) {
			t = d.Revoked.At
		}
		if !d.Until.IsZero() && d.Until.After(t) {
			t = d.Until
		}
	}
	if t.IsZero() {
		t = r.Created
	}
	return t
}

func (e *entry) grantKey() grantKey {
	name := e.r.Tool
	if e.r.Kind == KindConsent {
		name = e.r.URI
	}
	return grantKey{e.r.Kind, e.r.Principal, e.r.Server, name}
}

// Why requests expire, when the gateway tells held calls in its own words.
const (
	// noDecision: the request reached its timeout.
	noDecision = "no one decided in time"
	// gatewayStopped: the gateway stopped while the request was pending.
	gatewayStopped = "the gateway stopped"
)

// Close stops the gate: requests still pending end as expired, their held
// calls are answered, deliveries stop, and the store is closed. A Close
// made while another is under way returns once that one has finished: the
// command closes the gate when it is told to stop and again as it returns,
// and its process must not exit while a delivery that is stopping has yet
// to record how it ended.
func (g *Gate) Close() error {
	if g.closing.CompareAndSwap(false, true) {
		g.closeErr = g.close()
		close(g.closeDone)
	} else {
		<-g.closeDone
	}
	return g.closeErr
}

func (g *Gate) close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	for _, e := range g.pending {
		if g.pg != nil {
			// The request is shared: it stays pending for the other
			// replicas and the agent's retry. Only the calls held here end.
			g.releaseHeldLocked(e)
			continue
		}
		g.expireLocked(e, gatewayStopped)
	}
	for _, e := range g.ready {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
	return g.store.close()
}

// ReopenAudit opens the audit log in the state directory again by its
// path, for rotation (rename it, then reopen), and returns the path. A
// shared store keeps its audit log in the database: the path is empty and
// there is nothing to reopen.
func (g *Gate) ReopenAudit() (path string, err error) {
	fs, ok := g.store.(*fileStore)
	if !ok {
		return "", nil
	}
	return fs.reopenAudit()
}

// Link returns the approvals page's link to request id, or "" when
// Config.PageURL is not set.
func (g *Gate) Link(id string) string {
	if g.cfg.PageURL == "" {
		return ""
	}
	return g.cfg.PageURL + "/approvals/" + id
}

// CheckChannel reports why the channel named name cannot reach anyone as
// configured, or nil. The gateway asks it at boot and on every reload for
// the channel of every server with tool approvals and every ui:// consent
// channel: a hold nobody can be asked about must not start.
func (g *Gate) CheckChannel(name string, ch Channel) error {
	switch ch.Kind {
	case ChannelPage:
		if !g.cfg.PageServed {
			return fmt.Errorf("channel %q is the approvals page, but no admin listener serves it: configure approvals.admin with an address and at least one approver token", name)
		}
	case ChannelWebhook:
		if len(g.cfg.Webhook.Secret) == 0 {
			return fmt.Errorf("channel %q is a webhook (%s), but no webhook secret is configured to sign deliveries: set approvals.webhook_secret_env to a variable holding at least %d bytes", name, ch.URL, minSecret)
		}
		if err := checkWebhookURL(ch.URL); err != nil {
			return fmt.Errorf("channel %q: %v", name, err)
		}
		// A delivery only tells someone: the request is decided on the
		// approvals page or through the admin API, both on the admin
		// listener. Without it every held call would wait out its timeout.
		if !g.cfg.PageServed {
			return fmt.Errorf("channel %q is a webhook (%s), but no admin listener serves the approvals page and the admin API, where its requests are decided: configure approvals.admin with an address and at least one approver token", name, ch.URL)
		}
	default:
		return fmt.Errorf("channel %q: unknown kind %q; this gateway reaches humans through a webhook or the approvals page", name, ch.Kind)
	}
	return nil
}

// maxDuration is the longest approval a server allows.
func (g *Gate) maxDuration(server string) string {
	if d := g.cfg.Servers[server].MaxDuration; d != "" {
		return d
	}
	return ForWeek
}

// AllowedDurations lists the approval durations a request of server may be
// given, shortest first.
func (g *Gate) AllowedDurations(server string) []string {
	limit, _ := DurationOf(g.maxDuration(server))
	var out []string
	for _, d := range Durations {
		if v, _ := DurationOf(d); v <= limit {
			out = append(out, d)
		}
	}
	return out
}

// HoldCall holds a tool call until a human decides, its hold in place
// (c.HoldFor) ends or ctx does, and returns what became of it. A duration
// approval covering the principal and tool lets it through at once, and
// so does an approval once of the same call (principal, server, tool and
// fingerprint) that no call has used yet: the agent's retry after it was
// told of the approval. Otherwise it joins the pending request of the same
// call, or makes a new one (up to Config.MaxPending per principal) and
// notifies the channel. A request lives c.Timeout whether or not a call is
// held for it: when a hold in place ends first the call is answered
// AnswerPending.
//
// What each call folded into one request receives: denied, all are
// denied; expired, all time out; approved for a duration, every one of
// them runs (the approval covers every call of the tool); approved once,
// exactly one runs (the oldest still held) and every other is answered
// AnswerDuplicate without running.
func (g *Gate) HoldCall(ctx context.Context, c *Call) (Outcome, error) {
	if c.Principal == "" || c.Server == "" || c.Tool == "" {
		return Outcome{}, errors.New("a held call needs a principal, a server and a tool")
	}
	preview, ok := NewPreview(c.Arguments)
	if !ok {
		return Outcome{}, errors.New("the arguments of a held call must be a JSON object")
	}
	sum := sha256.Sum256(c.Arguments)
	fp := "sha256:" + hex.EncodeToString(sum[:])
	now := g.now()
	gk := grantKey{KindTool, c.Principal, c.Server, c.Tool}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return Outcome{}, errors.New("the approval gate is closed")
	}
	if e := g.activeGrantLocked(gk, now); e != nil {
		id := e.r.ID
		g.mu.Unlock()
		return g.runUnderGrant(c.Recheck, id), nil
	}
	key := foldKey{KindTool, c.Principal, c.Server, c.Tool, fp}
	if g.pg != nil {
		// Replicas fold by a keyed hash; the fingerprint stays here.
		fp = g.pg.fold(key)
		key.fingerprt = fp
	}
	if e := g.ready[key]; e != nil {
		// Only one call can take it: it leaves ready under g.mu.
		delete(g.ready, key)
		if e.timer != nil {
			e.timer.Stop()
		}
		g.mu.Unlock()
		return g.useReady(e, c.Recheck, now), nil
	}
	e := g.pending[key]
	var w *waiter
	if e != nil {
		var err error
		if w, err = g.joinRecordedLocked(e, ctx); err != nil {
			g.mu.Unlock()
			return Outcome{}, err
		}
	} else {
		if n := g.pendingOfLocked(c.Principal); g.pg == nil && n >= g.cfg.MaxPending {
			g.mu.Unlock()
			return g.refused(c.Principal, n), nil
		}
		ch, err := g.channel(c.Channel)
		if err != nil {
			g.mu.Unlock()
			return Outcome{}, err
		}
		r := Request{
			Kind: KindTool, Principal: c.Principal, Server: c.Server, Tool: c.Tool, Fingerprint: fp,
			Preview: preview, Origin: c.Origin, Channel: ch.Name, Client: c.Client, Session: c.Session,
			TableSerial: c.TableSerial, TableDigest: c.TableDigest,
		}
		if g.cfg.Servers[c.Server].NoPreview {
			r.Preview, r.PreviewOff = nil, true
		}
		var cl claim
		if e, w, cl, err = g.createLocked(ctx, r, key, c.Timeout, now, ch); err != nil {
			g.mu.Unlock()
			return Outcome{}, err
		}
		switch {
		case cl.ready != nil:
			// Another replica's unused approval once of this call.
			e := g.installLocked(cl.ready)
			if g.ready[key] == e {
				delete(g.ready, key)
				e.timer.Stop()
			}
			g.mu.Unlock()
			return g.useReady(e, c.Recheck, now), nil
		case e == nil:
			g.mu.Unlock()
			return g.refused(c.Principal, cl.pending), nil
		}
	}
	g.mu.Unlock()
	return g.wait(e, w, c.HoldFor, c.Progress, c.Recheck), nil
}

// refused is the outcome of a call refused because its principal has n
// requests pending, the most allowed.
func (g *Gate) refused(principal string, n int) Outcome {
	g.logger.Warn("approval request refused: too many pending", "principal", principal, "pending", n, "max_pending", g.cfg.MaxPending)
	return Outcome{Answer: AnswerRefused, Reason: fmt.Sprintf("%d approval requests of this principal are pending already, the most the gateway allows; wait for them to be decided (or to expire) before making another", n)}
}

// pendingOfLocked is the number of requests principal has pending.
func (g *Gate) pendingOfLocked(principal string) int {
	n := 0
	for k := range g.pending {
		if k.principal == principal {
			n++
		}
	}
	return n
}

// useReady runs a call with the approval once that e holds for it: re-check,
// then record the use. The caller took e out of ready.
func (g *Gate) useReady(e *entry, recheck func() error, now time.Time) Outcome {
	var why string
	if recheck != nil {
		if err := recheck(); err != nil {
			why = "not run: " + err.Error()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.outcome(e)
	if why == "" && !now.Before(g.onceDeadline(e)) {
		why = "not run: the approval was not used in time"
	}
	for try := 0; ; try++ {
		if e.r.Ran != "" {
			// Another replica's call used it first.
			o.Answer = AnswerDuplicate
			return o
		}
		r := e.r.clone()
		r.Ran = "ran"
		ev := r.event(g.now(), "ran", Approver{}, "")
		if why != "" {
			r.Ran = why
			ev = r.event(g.now(), "not_run", Approver{}, why)
		}
		if err := g.storeLocked(e, &r, ev); err != nil {
			if isStale(err) && try < maxTries {
				continue
			}
			why = "not run: its use could not be recorded: " + err.Error()
			r.Ran = why
		}
		e.r = r
		break
	}
	g.changedLocked()
	if why != "" {
		o.Answer, o.Reason = AnswerNotRun, strings.TrimPrefix(why, "not run: ")
		return o
	}
	o.Answer = AnswerRun
	return o
}

// readyLocked makes e's approval once wait for the next identical call,
// until it lapses.
func (g *Gate) readyLocked(e *entry, now time.Time) {
	key := e.foldKey()
	g.ready[key] = e
	e.timer = time.AfterFunc(g.onceDeadline(e).Sub(now), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.ready[key] != e {
			return
		}
		delete(g.ready, key)
		for try := 0; e.r.Ran == ""; try++ {
			r := e.r.clone()
			r.Ran = "not run: no call used the approval in time"
			if err := g.storeLocked(e, &r, r.event(g.now(), "not_run", Approver{}, r.Ran)); err != nil {
				if isStale(err) && try < maxTries {
					continue
				}
				g.logger.Error("recording an unused approval failed", "id", r.ID, "error", err.Error())
			}
			e.r = r
		}
		g.changedLocked()
	})
}

// armExpiry expires pending request e at its expiry.
func (g *Gate) armExpiry(e *entry, now time.Time) {
	e.timer = time.AfterFunc(e.r.Expires.Sub(now), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if e.r.Status == Pending {
			g.expireLocked(e, noDecision)
		}
	})
}

// Await waits until principal's request id is no longer pending, or ctx
// ends, and returns it. It reports false for an unknown request and for
// another principal's, alike: a principal sees only its own requests.
func (g *Gate) Await(ctx context.Context, principal, id string) (Request, bool) {
	for {
		g.mu.Lock()
		e := g.reqs[id]
		if e == nil || e.r.Principal != principal || e.r.Kind != KindTool {
			g.mu.Unlock()
			return Request{}, false
		}
		r, changed := e.r.clone(), g.notified
		g.mu.Unlock()
		if r.Status != Pending {
			return r, true
		}
		g.awaiting.Add(1)
		select {
		case <-changed:
			g.awaiting.Add(-1)
		case <-ctx.Done():
			g.awaiting.Add(-1)
			return r, true
		}
	}
}

// PendingOf returns principal's pending tool-call requests, oldest first.
func (g *Gate) PendingOf(principal string) []Request {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Request
	for k, e := range g.pending {
		if k.principal == principal && k.kind == KindTool {
			out = append(out, e.r.clone())
		}
	}
	slices.SortFunc(out, func(a, b Request) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// ConsentCall is one read of an allowlisted ui:// resource.
type ConsentCall struct {
	Principal, Server, URI string
	Channel                Channel
	Client, Session        string
	TableSerial            uint64
	TableDigest            string
}

// Consent reports whether the principal consents to the ui:// resource:
// at once when consent is remembered, else after asking through the
// channel and waiting up to Config.ConsentWait (or until ctx ends). A
// granted consent is remembered until revoked; a denied or unanswered one
// denies this read only.
func (g *Gate) Consent(ctx context.Context, c *ConsentCall) (bool, Outcome, error) {
	if c.Principal == "" || c.Server == "" || !strings.HasPrefix(c.URI, "ui://") {
		return false, Outcome{}, errors.New("consent is asked for a principal's read of a ui:// resource of a server")
	}
	now := g.now()
	gk := grantKey{KindConsent, c.Principal, c.Server, c.URI}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false, Outcome{}, errors.New("the approval gate is closed")
	}
	if e := g.activeGrantLocked(gk, now); e != nil {
		id := e.r.ID
		g.mu.Unlock()
		return true, Outcome{Answer: AnswerRun, RequestID: id, For: ForRemember}, nil
	}
	key := foldKey{KindConsent, c.Principal, c.Server, c.URI, ""}
	if g.pg != nil {
		key.fingerprt = g.pg.fold(key)
	}
	e := g.pending[key]
	var w *waiter
	if e != nil {
		var err error
		if w, err = g.joinRecordedLocked(e, ctx); err != nil {
			g.mu.Unlock()
			return false, Outcome{}, err
		}
	} else {
		ch, err := g.channel(c.Channel)
		if err != nil {
			g.mu.Unlock()
			return false, Outcome{}, err
		}
		r := Request{
			Kind: KindConsent, Principal: c.Principal, Server: c.Server, URI: c.URI, Channel: ch.Name,
			Client: c.Client, Session: c.Session, TableSerial: c.TableSerial, TableDigest: c.TableDigest,
			Fingerprint: key.fingerprt,
		}
		var cl claim
		if e, w, cl, err = g.createLocked(ctx, r, key, g.cfg.ConsentWait, now, ch); err != nil {
			g.mu.Unlock()
			return false, Outcome{}, err
		}
		if e == nil {
			// Consent is never approved once and has no cap: a claim
			// other than a request is a store out of step with the gate.
			g.mu.Unlock()
			return false, Outcome{}, fmt.Errorf("the approval store answered a consent request with %+v", cl)
		}
	}
	g.mu.Unlock()
	o := g.wait(e, w, 0, nil, nil)
	return o.Answer == AnswerRun, o, nil
}

func (g *Gate) channel(ch Channel) (Channel, error) {
	if ch.Kind == "" && g.cfg.Channels != nil {
		if c, ok := g.cfg.Channels(ch.Name); ok {
			ch = c
			if ch.Name == "" {
				ch.Name = c.Name
			}
		}
	}
	if ch.Kind == "" {
		return ch, fmt.Errorf("approval channel %q is unknown, so no human can be asked", ch.Name)
	}
	return ch, nil
}

// createLocked makes, records and announces a new pending request, with
// the call that made it (ctx is its context) held for it: the request is
// recorded counting that call.
//
// With a shared store, the request may exist already, made by another
// replica: the call joins it. Or an approval once of the same call waits
// unused, or the principal has too many requests pending across replicas:
// then no entry is returned, and the claim says which.
func (g *Gate) createLocked(ctx context.Context, r Request, key foldKey, timeout time.Duration, now time.Time, ch Channel) (*entry, *waiter, claim, error) {
	if err := g.store.failed(); err != nil {
		return nil, nil, claim{}, fmt.Errorf("the approval store cannot record requests: %w", err)
	}
	g.pruneLocked(now)
	if timeout <= 0 {
		timeout = 300 * time.Second
	}
	r.ID = newID()
	r.Status = Pending
	r.Created = now
	r.Expires = now.Add(timeout)
	if ch.Kind == ChannelWebhook {
		r.Delivery = &Delivery{State: "sending"}
	}
	r.Calls = 1
	if g.pg != nil {
		maxPending := g.cfg.MaxPending
		if r.Kind == KindConsent {
			maxPending = 0
		}
		cl, err := g.pg.createOrJoin(&r, maxPending, r.event(now, "requested", Approver{}, ""), now)
		if err != nil {
			return nil, nil, claim{}, notRecorded(err)
		}
		if cl.joined != nil {
			e := g.installLocked(cl.joined)
			if e.r.Status != Pending {
				// Decided as it was joined: the notification is on its
				// way, and the call is answered as the request was.
				return nil, nil, claim{}, fmt.Errorf("request %s of this call was %s as the call joined it; repeat the call", e.r.ID, e.r.Status)
			}
			e.r.Calls-- // the store counted the call; joinLocked counts it again
			return e, g.joinLocked(e, ctx), claim{}, nil
		}
		if cl.made == nil {
			return nil, nil, cl, nil
		}
	} else if err := g.store.put(&r, r.event(now, "requested", Approver{}, "")); err != nil {
		return nil, nil, claim{}, fmt.Errorf("the approval request could not be recorded, so it was not made: %w", err)
	}
	w := newWaiter(ctx)
	e := &entry{r: r, waiters: []*waiter{w}}
	g.reqs[r.ID] = e
	g.pending[key] = e
	g.armExpiry(e, now)
	g.logger.Info("approval requested", "id", r.ID, "kind", string(r.Kind), "principal", r.Principal, "server", r.Server, "tool", r.Tool, "uri", r.URI, "channel", ch.Name, "expires", r.Expires)
	if ch.Kind == ChannelWebhook {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.deliver(e, ch)
		}()
	}
	g.changedLocked()
	return e, w, claim{}, nil
}

func newWaiter(ctx context.Context) *waiter {
	return &waiter{sig: make(chan signal, 1), ctx: ctx}
}

// joinLocked holds a call (ctx is its context) for the pending request e,
// which counts it.
func (g *Gate) joinLocked(e *entry, ctx context.Context) *waiter {
	w := newWaiter(ctx)
	e.waiters = append(e.waiters, w)
	e.r.Calls++
	g.changedLocked()
	return w
}

// joinRecordedLocked is joinLocked for a call that finds its request
// pending on this replica: with a shared store the call is counted there
// first, and refused when that cannot be recorded.
func (g *Gate) joinRecordedLocked(e *entry, ctx context.Context) (*waiter, error) {
	if g.pg != nil {
		rev, pending, err := g.pg.join(e.r.ID)
		if err != nil {
			return nil, notRecorded(err)
		}
		if !pending {
			// Ended elsewhere, the notification not here yet: take
			// the request as it is, so that the repeat finds it so.
			ctx, cancel := g.pg.op()
			cur, gerr := g.pg.get(ctx, e.r.ID)
			cancel()
			if gerr == nil {
				g.applyLocked(e, cur)
			}
			return nil, fmt.Errorf("request %s of this call ended as the call joined it; repeat the call", e.r.ID)
		}
		if rev == e.r.rev+1 {
			e.r.rev = rev
		}
	}
	return g.joinLocked(e, ctx), nil
}

// notRecorded is the refusal of a call whose request the shared store
// could not record (err says why).
func notRecorded(err error) error {
	return fmt.Errorf("the approval request could not be recorded, so it was not made and the call did not run: %w", err)
}

// changedLocked wakes whoever waits for a change (the approvals page's
// tests and long polls).
func (g *Gate) changedLocked() {
	close(g.notified)
	g.notified = make(chan struct{})
}

// Changed returns a channel closed at the next change of any request.
func (g *Gate) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.notified
}

func (g *Gate) activeGrantLocked(k grantKey, now time.Time) *entry {
	list := g.grants[k]
	var found *entry
	kept := list[:0]
	for _, e := range list {
		if e.r.Active(now) {
			kept = append(kept, e)
			if found == nil || e.r.Decision.For == ForRemember || e.r.Decision.Until.After(found.r.Decision.Until) {
				found = e
			}
		}
	}
	clear(list[len(kept):])
	if len(kept) == 0 {
		delete(g.grants, k)
	} else {
		g.grants[k] = kept
	}
	return found
}

// runUnderGrant lets a call through under the remembered approval id,
// after the caller's re-check and a last look that it still stands.
func (g *Gate) runUnderGrant(recheck func() error, id string) Outcome {
	o := Outcome{RequestID: id, URL: g.Link(id)}
	if recheck != nil {
		if err := recheck(); err != nil {
			o.Answer, o.Reason = AnswerNotRun, err.Error()
			return o
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.reqs[id]
	if e == nil || !e.r.Active(g.now()) {
		o.Answer, o.Reason = AnswerNotRun, "the approval was revoked or ended before the call could run"
		return o
	}
	o.Answer, o.By, o.For = AnswerRun, e.r.Decision.By, e.r.Decision.For
	return o
}

// wait waits for w's signal, for at most holdFor when it is set, telling
// progress meanwhile.
func (g *Gate) wait(e *entry, w *waiter, holdFor time.Duration, progress func(string), recheck func() error) Outcome {
	var tick, hold <-chan time.Time
	if holdFor > 0 {
		t := time.NewTimer(holdFor)
		defer t.Stop()
		hold = t.C
	}
	if progress != nil {
		t := time.NewTicker(g.cfg.ProgressInterval)
		defer t.Stop()
		tick = t.C
		progress(g.waitingMessage(e))
	}
	for {
		var o Outcome
		select {
		case s := <-w.sig:
			o = g.answer(e, w, s, recheck)
		case <-tick:
			progress(g.waitingMessage(e))
			continue
		case <-w.ctx.Done():
			o = g.leave(e, w, recheck, false)
		case <-hold:
			o = g.leave(e, w, recheck, true)
		}
		g.mu.Lock()
		report := w.report
		g.mu.Unlock()
		if report != nil {
			report.add(o)
		}
		return o
	}
}

func (g *Gate) waitingMessage(e *entry) string {
	g.mu.Lock()
	id, kind := e.r.ID, e.r.Kind
	g.mu.Unlock()
	what := "a human's approval"
	if kind == KindConsent {
		what = "consent"
	}
	msg := "waiting for " + what + ": request " + id
	if l := g.Link(id); l != "" {
		msg += " (" + l + ")"
	}
	return msg
}

func (g *Gate) outcome(e *entry) Outcome {
	o := Outcome{RequestID: e.r.ID, URL: g.Link(e.r.ID), Expires: e.r.Expires}
	if d := e.r.Decision; d != nil {
		o.By, o.For, o.Reason = d.By, d.For, d.Reason
	}
	return o
}

// answer turns w's signal into the call's outcome.
func (g *Gate) answer(e *entry, w *waiter, s signal, recheck func() error) Outcome {
	g.mu.Lock()
	o := g.outcome(e)
	kind := e.r.Kind
	g.mu.Unlock()
	switch s.kind {
	case sigDeny:
		o.Answer = AnswerDenied
	case sigExpired:
		o.Answer, o.Reason = AnswerTimedOut, s.reason
	case sigDuplicate:
		o.Answer = AnswerDuplicate
	case sigNotRun:
		o.Answer, o.Reason = AnswerNotRun, s.reason
	case sigGrant:
		if kind == KindConsent {
			o.Answer = AnswerRun
			return o
		}
		return g.runUnderGrant(recheck, o.RequestID)
	case sigOnce:
		return g.useOnce(e, w, recheck)
	}
	return o
}

// useOnce runs the call an approval once went to: re-check, then record
// the use, then release it; the other calls held for the request are
// answered as duplicates.
func (g *Gate) useOnce(e *entry, w *waiter, recheck func() error) Outcome {
	var why string
	if recheck != nil {
		if err := recheck(); err != nil {
			why = "not run: " + err.Error()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.outcome(e)
	now := g.now()
	if why == "" && w.ctx.Err() != nil {
		// The call ended as it was chosen: the approval goes on to the
		// next call held for it.
		g.passOnLocked(e, w)
		o.Answer, o.Reason = AnswerTimedOut, "the call ended before it could run"
		return o
	}
	if why == "" && now.Sub(e.r.Decision.At) > g.cfg.OnceWindow {
		why = fmt.Sprintf("not run: the approval was not used within %s of the decision", g.cfg.OnceWindow)
	}
	e.chosen = nil
	e.waiters = slices.DeleteFunc(e.waiters, func(x *waiter) bool { return x == w })
	for try := 0; ; try++ {
		if e.r.Ran != "" {
			// A call held on another replica used it first: this one
			// and every other held here are duplicates.
			why = ""
			o.Answer = AnswerDuplicate
			break
		}
		r := e.r.clone()
		if why == "" {
			r.Ran = "ran"
		} else {
			r.Ran = why
		}
		ev := r.event(now, "ran", Approver{}, "")
		if why != "" {
			ev = r.event(now, "not_run", Approver{}, why)
		}
		if err := g.storeLocked(e, &r, ev); err != nil {
			if isStale(err) && try < maxTries {
				continue
			}
			why = "not run: its use could not be recorded: " + err.Error()
			r.Ran = why
		}
		e.r = r
		break
	}
	rest := e.waiters
	e.waiters = nil
	for _, x := range rest {
		if why == "" {
			x.sig <- signal{kind: sigDuplicate}
		} else {
			x.sig <- signal{kind: sigNotRun, reason: strings.TrimPrefix(why, "not run: ")}
		}
	}
	g.changedLocked()
	if why != "" {
		o.Answer, o.Reason = AnswerNotRun, strings.TrimPrefix(why, "not run: ")
		return o
	}
	if o.Answer != AnswerDuplicate {
		o.Answer = AnswerRun
	}
	return o
}

// passOnLocked hands an approval once from w, which ended, to the next
// call held for the request; with none left, the approval lapses unused.
func (g *Gate) passOnLocked(e *entry, w *waiter) {
	e.waiters = slices.DeleteFunc(e.waiters, func(x *waiter) bool { return x == w })
	if e.chosen != w {
		return
	}
	e.chosen = nil
	if len(e.waiters) > 0 {
		e.chosen = e.waiters[0]
		e.chosen.sig <- signal{kind: sigOnce}
		return
	}
	// No call is held for it: the agent's retry of the same call uses it.
	g.readyLocked(e, g.now())
	g.changedLocked()
}

// leave takes w, whose context or hold in place (held) ended, off its
// request. A tool call's request goes on: the agent may wait for it and
// repeat the call. A consent request left with no held read expires:
// there is nothing left to consent to.
func (g *Gate) leave(e *entry, w *waiter, recheck func() error, held bool) Outcome {
	g.mu.Lock()
	select {
	case s := <-w.sig:
		// Decided as the call ended.
		if s.kind == sigOnce {
			defer g.mu.Unlock()
			g.passOnLocked(e, w)
			o := g.outcome(e)
			o.Answer, o.Reason = AnswerTimedOut, "the call ended before it could run"
			return o
		}
		g.mu.Unlock()
		if s.kind == sigGrant {
			s = signal{kind: sigExpired, reason: "the call ended before it could run"}
		}
		return g.answer(e, w, s, recheck)
	default:
	}
	defer g.mu.Unlock()
	e.waiters = slices.DeleteFunc(e.waiters, func(x *waiter) bool { return x == w })
	o := g.outcome(e)
	if e.r.Status == Pending && !g.now().Before(e.r.Expires) {
		// The call's context ended with its request's life, before the
		// request's own timer: it expires now.
		g.expireLocked(e, noDecision)
		o.Answer, o.Reason = AnswerTimedOut, noDecision
		return o
	}
	if e.r.Kind == KindTool && e.r.Status == Pending {
		o.Answer = AnswerPending
		if !held {
			o.Reason = "the call ended before a decision"
		}
		g.changedLocked()
		return o
	}
	o.Answer = AnswerTimedOut
	o.Reason = noDecision
	if !errors.Is(w.ctx.Err(), context.DeadlineExceeded) {
		o.Reason = "the call ended before a decision"
	}
	if e.r.Status == Pending && len(e.waiters) == 0 {
		why := o.Reason
		if why != noDecision {
			why = "every call held for it ended before a decision"
		}
		g.expireLocked(e, why)
	}
	return o
}

// expireLocked ends a pending request as expired and answers its calls.
func (g *Gate) expireLocked(e *entry, why string) {
	if e.r.Status != Pending {
		return
	}
	now := g.now()
	r := e.r.clone()
	r.Status, r.Ended, r.End = Expired, now, why
	if err := g.storeLocked(e, &r, r.event(now, "expired", Approver{}, why)); err != nil {
		if isStale(err) {
			// Another replica changed it first (and applying that
			// answered the calls when it ended the request).
			if e.r.Status == Pending {
				g.expireLocked(e, why)
			}
			return
		}
		// Expiring denies nothing that was allowed; the request is over in
		// memory either way, and a restart expires it again.
		g.logger.Error("recording an expired request failed", "id", r.ID, "error", err.Error())
	}
	e.r = r
	g.finishLocked(e)
	for _, w := range e.waiters {
		w.sig <- signal{kind: sigExpired, reason: why}
	}
	e.waiters = nil
	g.changedLocked()
}

// finishLocked takes a request that is no longer pending out of the fold.
func (g *Gate) finishLocked(e *entry) {
	if e.timer != nil {
		e.timer.Stop()
	}
	for k, x := range g.pending {
		if x == e {
			delete(g.pending, k)
			break
		}
	}
}

// Decide approves or denies request id. verdict is VerdictApprove or
// VerdictDeny; for an approval of a tool call, forWhat is "once", "1h", "8h"
// or "7d" (within the server's longest), for consent it is "remember" (or
// empty). It refuses an unknown request (ErrNotFound), one already decided
// (ErrDecided) or expired (ErrExpired), the principal's own request
// (ErrSelf) and anything else it cannot do (ErrInvalid). The decision is on
// disk before any held call learns of it.
func (g *Gate) Decide(id, verdict, forWhat, reason string, by Approver) (Request, error) {
	r, _, err := g.decide(id, verdict, forWhat, reason, by)
	return r, err
}

// DecideAndReport is Decide, and then says what became of the calls held
// for the request when it was decided: it waits until each is answered or
// ctx ends (the calls not answered by then are counted as "pending"). An
// approved call may still not run: a reload may have denied it meanwhile,
// or the approval lapsed before it could be used.
func (g *Gate) DecideAndReport(ctx context.Context, id, verdict, forWhat, reason string, by Approver) (Request, []HeldCall, error) {
	r, report, err := g.decide(id, verdict, forWhat, reason, by)
	if err != nil {
		return r, nil, err
	}
	select {
	case <-report.done:
	case <-ctx.Done():
	}
	if now, ok := g.Get(id); ok {
		r = now // with what became of an approval once (Ran)
	}
	return r, report.result(), nil
}

// decide records the decision and answers the calls held for the request;
// the report is told what became of each.
func (g *Gate) decide(id, verdict, forWhat, reason string, by Approver) (Request, *heldReport, error) {
	if by.Name == "" {
		return Request{}, nil, refuse(ErrInvalid, "a decision needs the approver's name")
	}
	if len(reason) > 1000 {
		return Request{}, nil, refuse(ErrInvalid, "the reason is longer than 1000 bytes")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.reqs[id]
	if e == nil && g.pg != nil {
		// Made on another replica, and not yet heard of here.
		ctx, cancel := g.pg.op()
		r, err := g.pg.get(ctx, id)
		cancel()
		if err == nil {
			e = g.installLocked(r)
		}
	}
	if e == nil {
		return Request{}, nil, refuse(ErrNotFound, "no approval request %q (list them with 'policyc approvals list')", id)
	}
	var now time.Time
	for try := 0; ; try++ {
		now = g.now()
		if err := g.decidableLocked(e, now); err != nil {
			return Request{}, nil, err
		}
		if principal.Same(by.Name, e.r.Principal) {
			return Request{}, nil, refuse(ErrSelf, "request %s was made by %s, who cannot decide it; another approver must", id, by.Name)
		}
		d := &Decision{Verdict: verdict, By: by.Name, From: by.From, At: now, Reason: reason}
		switch verdict {
		case VerdictDeny:
		case VerdictApprove:
			switch {
			case e.r.Kind == KindConsent:
				if forWhat != "" && forWhat != ForRemember {
					return Request{}, nil, refuse(ErrInvalid, "consent is remembered until revoked; it is not given for %q", forWhat)
				}
				d.For = ForRemember
			default:
				if forWhat == "" {
					forWhat = ForOnce
				}
				dur, err := DurationOf(forWhat)
				if err != nil {
					return Request{}, nil, refuse(ErrInvalid, "%v", err)
				}
				if !slices.Contains(g.AllowedDurations(e.r.Server), forWhat) {
					return Request{}, nil, refuse(ErrInvalid, "server %s allows approvals of at most %s; choose one of %s", e.r.Server, g.maxDuration(e.r.Server), strings.Join(g.AllowedDurations(e.r.Server), ", "))
				}
				d.For = forWhat
				if dur > 0 {
					d.Until = now.Add(dur)
				}
			}
		default:
			return Request{}, nil, refuse(ErrInvalid, "the verdict is approve or deny, not %q", verdict)
		}
		r := e.r.clone()
		r.Decision = d
		r.Status = Approved
		event := "approved"
		if verdict == VerdictDeny {
			r.Status, event = Denied, "denied"
		}
		r.Ended = now
		if err := g.storeLocked(e, &r, r.event(now, event, by, reason)); err != nil {
			if isStale(err) && try < maxTries {
				continue // decided, expired or joined on another replica: look again
			}
			return Request{}, nil, fmt.Errorf("the decision could not be recorded, so it was not taken: %w", err)
		}
		e.r = r
		break
	}
	g.finishLocked(e)
	report := newHeldReport(len(e.waiters))
	for _, w := range e.waiters {
		w.report = report
	}
	g.releaseLocked(e, now)
	d := e.r.Decision
	g.logger.Info("approval decided", "id", id, "verdict", verdict, "for", d.For, "by", by.Name, "from", by.From)
	g.changedLocked()
	return e.r.clone(), report, nil
}

// decidableLocked reports why e cannot be decided now.
func (g *Gate) decidableLocked(e *entry, now time.Time) error {
	r := &e.r
	switch r.Status {
	case Approved, Denied:
		d := r.Decision
		how := string(r.Status)
		if d.For != "" {
			how += " (" + d.For + ")"
		}
		return refuse(ErrDecided, "request %s was already %s by %s at %s", r.ID, how, d.By, d.At.UTC().Format(time.RFC3339))
	case Expired:
		return refuse(ErrExpired, "request %s expired at %s (%s); the call did not run", r.ID, r.Ended.UTC().Format(time.RFC3339), r.End)
	}
	if !now.Before(r.Expires) {
		g.expireLocked(e, noDecision)
		return refuse(ErrExpired, "request %s expired at %s; the call did not run", r.ID, r.Expires.UTC().Format(time.RFC3339))
	}
	if len(e.waiters) == 0 && r.Kind == KindConsent && g.pg == nil {
		// (With replicas, the read may be held on another one.)
		g.expireLocked(e, "every call held for it ended before a decision")
		return refuse(ErrExpired, "request %s has no call waiting any more; it expired", r.ID)
	}
	return nil
}

// Revoke ends the remembered approval (a duration approval or a consent)
// that request id granted: the principal's next call asks again. Calls
// already let through are not undone.
func (g *Gate) Revoke(id string, by Approver) (Request, error) {
	if by.Name == "" {
		return Request{}, refuse(ErrInvalid, "a revocation needs the approver's name")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.reqs[id]
	if e == nil {
		return Request{}, refuse(ErrNotFound, "no approval request %q", id)
	}
	var r Request
	for try := 0; ; try++ {
		now := g.now()
		r = e.r.clone()
		if !r.Active(now) {
			switch d := r.Decision; {
			case r.Status != Approved:
				return Request{}, refuse(ErrDecided, "request %s is %s: there is no approval to revoke", id, r.Status)
			case d.Revoked != nil:
				return Request{}, refuse(ErrDecided, "the approval of request %s was already revoked by %s at %s", id, d.Revoked.By, d.Revoked.At.UTC().Format(time.RFC3339))
			case d.For == ForOnce:
				return Request{}, refuse(ErrDecided, "request %s was approved once; an approval once is not remembered, so there is nothing to revoke", id)
			default:
				return Request{}, refuse(ErrExpired, "the approval of request %s ended at %s", id, d.Until.UTC().Format(time.RFC3339))
			}
		}
		r.Decision.Revoked = &Revocation{By: by.Name, From: by.From, At: now}
		if err := g.storeLocked(e, &r, r.event(now, "revoked", by, "")); err != nil {
			if isStale(err) && try < maxTries {
				continue
			}
			return Request{}, fmt.Errorf("the revocation could not be recorded, so it was not made: %w", err)
		}
		e.r = r
		break
	}
	g.activeGrantLocked(e.grantKey(), g.now()) // drops it
	g.logger.Info("approval revoked", "id", id, "by", by.Name, "from", by.From)
	g.changedLocked()
	return e.r.clone(), nil
}

// Get returns request id.
func (g *Gate) Get(id string) (Request, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.reqs[id]
	if e == nil {
		return Request{}, false
	}
	return e.r.clone(), true
}

// Filter selects requests for List.
type Filter struct {
	// Status keeps requests with this status; empty keeps all.
	Status Status
	// Active keeps remembered approvals still in force only.
	Active bool
}

// List returns the requests the filter keeps, newest first.
func (g *Gate) List(f Filter) []Request {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	out := []Request{}
	for _, e := range g.reqs {
		if f.Status != "" && e.r.Status != f.Status || f.Active && !e.r.Active(now) {
			continue
		}
		out = append(out, e.r.clone())
	}
	slices.SortFunc(out, func(a, b Request) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Waiting returns how many calls are held for request id now.
func (g *Gate) Waiting(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.reqs[id]; e != nil {
		return len(e.waiters)
	}
	return 0
}

// event is the audit record of something that happened to r.
func (r *Request) event(at time.Time, what string, by Approver, detail string) *Event {
	ev := &Event{Time: at, Event: what, ID: r.ID, Kind: r.Kind, Principal: r.Principal, Server: r.Server, Tool: r.Tool, URI: r.URI,
		By: by.Name, From: by.From, Detail: detail}
	if d := r.Decision; d != nil && (what == "approved" || what == "revoked") {
		ev.For, ev.Until = d.For, d.Until
	}
	return ev
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns a request id: "apr-" and 80 random bits. Ids are not
// secrets (an approver token is needed to act on one), but they cannot be
// guessed from another.
func newID() string {
	var b [10]byte
	rand.Read(b[:])
	return "apr-" + idEncoding.EncodeToString(b[:])
}

// ValidID reports whether s has the form of a request id.
func ValidID(s string) bool {
	if len(s) != 20 || !strings.HasPrefix(s, "apr-") {
		return false
	}
	for _, c := range s[4:] {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
