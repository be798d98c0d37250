package approval

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/policyc/policyc/internal/pgtest"
	"github.com/policyc/policyc/internal/policytest"
	"github.com/policyc/policyc/runtime/decide"
)

// openReplica opens a gate on the shared state database at dsn, as one
// gateway replica does.
func openReplica(t testing.TB, dsn string, mutate func(*Config, *PostgresOptions)) *Gate {
	t.Helper()
	cfg := Config{PageServed: true, PageURL: "http://approvals.test"}
	o := PostgresOptions{DSN: dsn}
	if mutate != nil {
		mutate(&cfg, &o)
	}
	pg, err := OpenPostgres(context.Background(), o)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	cfg.Store = pg
	g, err := Open(cfg)
	if err != nil {
		pg.Close()
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		g.Close()
		pg.Close()
	})
	return g
}

// queryRow reads one row of the database at dsn.
func queryRow(t testing.TB, dsn, sql string, dest ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), sql).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// pendingOn waits until g knows a pending request for principal and tool,
// and returns it (it may be held on another replica).
func pendingOn(t testing.TB, g *Gate, principal, tool string) Request {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := g.Changed()
		for _, r := range g.List(Filter{Status: Pending}) {
			if r.Principal == principal && r.Tool == tool {
				return r
			}
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no pending request for %s/%s", principal, tool)
		}
	}
}

// waitingOn waits until the gates hold n calls for request id in all.
func waitingOn(t testing.TB, id string, n int, gates ...*Gate) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		var chs []<-chan struct{}
		total := 0
		for _, g := range gates {
			chs = append(chs, g.Changed())
			total += g.Waiting(id)
		}
		if total == n {
			return
		}
		if total > n {
			t.Fatalf("%d calls held for %s, want %d", total, id, n)
		}
		cases := make(chan struct{}, len(chs))
		stop := make(chan struct{})
		for _, ch := range chs {
			go func() {
				select {
				case <-ch:
					cases <- struct{}{}
				case <-stop:
				}
			}()
		}
		select {
		case <-cases:
			close(stop)
		case <-deadline:
			close(stop)
			t.Fatalf("%d calls held for %s, want %d", total, id, n)
		}
	}
}

// The PostgreSQL store keeps what the file store keeps: requests,
// decisions, remembered approvals (which stand after a restart), the audit
// log; never the arguments or their fingerprint.
func TestPostgresStore(t *testing.T) {
	dsn := pgtest.DB(t)
	g := openReplica(t, dsn, nil)
	const secret = `{"repo":"acme/secret-repo-name"}`
	h := hold(context.Background(), g, call("alice", "delete_repo", secret))
	r := pendingFor(t, g, "alice", "delete_repo", 1)
	mustDecide(t, g, r.ID, VerdictApprove, ForHour)
	if o := recv(t, h); o.err != nil || o.o.Answer != AnswerRun {
		t.Fatalf("held call: %+v", o)
	}
	g.Close()

	// A new gateway on the same database: the approval for an hour stands.
	g2 := openReplica(t, dsn, nil)
	o, err := g2.HoldCall(context.Background(), call("alice", "delete_repo", `{"repo":"other"}`))
	if err != nil || o.Answer != AnswerRun || o.RequestID != r.ID {
		t.Fatalf("under the remembered approval: %+v, %v; want run under %s", o, err, r.ID)
	}
	var events string
	queryRow(t, dsn, `SELECT string_agg(event, ',' ORDER BY seq) FROM approval_events WHERE id = '`+r.ID+`'`, &events)
	if events != "requested,approved" {
		t.Errorf("audit events %q, want requested,approved", events)
	}
	var dump string
	queryRow(t, dsn, `SELECT string_agg(data::text, ' ') FROM approval_requests`, &dump)
	if strings.Contains(dump, "sha256:") {
		t.Errorf("the stored requests hold a fingerprint: %s", dump)
	}
	var fold string
	queryRow(t, dsn, `SELECT fold FROM approval_requests WHERE id = '`+r.ID+`'`, &fold)
	if !strings.HasPrefix(fold, "h:") {
		t.Errorf("fold %q is not the keyed hash", fold)
	}
}

// A database whose schema is newer than this build is refused, saying so.
func TestPostgresNewerSchemaRefused(t *testing.T) {
	dsn := pgtest.DB(t)
	pg, err := OpenPostgres(context.Background(), PostgresOptions{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	pg.Close()
	pgtest.Exec(t, dsn, `INSERT INTO policyc_schema (version_id, is_applied) VALUES (99, true)`)
	_, err = OpenPostgres(context.Background(), PostgresOptions{DSN: dsn})
	if err == nil || !strings.Contains(err.Error(), "schema is version 99, newer than this gateway's (1)") {
		t.Fatalf("got %v, want the newer schema refused", err)
	}
}

// Replicas migrating one new database at once migrate it once.
func TestPostgresConcurrentMigrations(t *testing.T) {
	dsn := pgtest.DB(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			pg, err := OpenPostgres(context.Background(), PostgresOptions{DSN: dsn})
			if err == nil {
				pg.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// A call held on one replica runs when an approver decides on another.
func TestReplicaDecidesElsewhere(t *testing.T) {
	dsn := pgtest.DB(t)
	a, b := openReplica(t, dsn, nil), openReplica(t, dsn, nil)
	h := hold(context.Background(), a, call("alice", "merge", `{"pr":1}`))
	r := pendingOn(t, b, "alice", "merge")
	waitingOn(t, r.ID, 1, a)
	mustDecide(t, b, r.ID, VerdictApprove, ForOnce)
	if o := recv(t, h); o.err != nil || o.o.Answer != AnswerRun {
		t.Fatalf("held call on a: %+v", o)
	}
	// Denial travels the same way.
	h = hold(context.Background(), b, call("alice", "merge", `{"pr":2}`))
	r = pendingOn(t, a, "alice", "merge")
	waitingOn(t, r.ID, 1, b)
	if _, err := a.Decide(r.ID, VerdictDeny, "", "not now", Approver{Name: "carol", From: "test"}); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, h); o.o.Answer != AnswerDenied || o.o.Reason != "not now" {
		t.Fatalf("held call on b: %+v", o)
	}
	// The second decision of one request, on the other replica, is refused.
	if _, err := b.Decide(r.ID, VerdictApprove, ForOnce, "", Approver{Name: "dave", From: "test"}); !errors.Is(err, ErrDecided) {
		t.Fatalf("second decision: %v, want ErrDecided", err)
	}
}

// With notifications off, the periodic re-read alone releases the call.
func TestReplicaResync(t *testing.T) {
	dsn := pgtest.DB(t)
	quiet := func(_ *Config, o *PostgresOptions) { o.noListen, o.Resync = true, 20*time.Millisecond }
	a, b := openReplica(t, dsn, quiet), openReplica(t, dsn, quiet)
	h := hold(context.Background(), a, call("alice", "merge", `{"pr":1}`))
	r := pendingOn(t, b, "alice", "merge")
	mustDecide(t, b, r.ID, VerdictApprove, ForOnce)
	if o := recv(t, h); o.err != nil || o.o.Answer != AnswerRun {
		t.Fatalf("held call on a: %+v", o)
	}
}

// 100 identical calls spread over three replicas make one request, and an
// approval once runs exactly one of them; the others are duplicates.
func TestReplicasApproveOnceExactlyOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	gates := []*Gate{openReplica(t, dsn, nil), openReplica(t, dsn, nil), openReplica(t, dsn, nil)}
	const n = 100
	results := make([]<-chan held, n)
	for i := range n {
		results[i] = hold(context.Background(), gates[i%len(gates)], call("alice", "deploy", `{"env":"prod"}`))
	}
	r := pendingOn(t, gates[0], "alice", "deploy")
	waitingOn(t, r.ID, n, gates...)
	var ids []string
	for _, g := range gates {
		for _, q := range g.List(Filter{Status: Pending}) {
			ids = append(ids, q.ID)
		}
	}
	for _, id := range ids {
		if id != r.ID {
			t.Fatalf("pending requests %v: identical calls did not fold into one", ids)
		}
	}
	mustDecide(t, gates[1], r.ID, VerdictApprove, ForOnce)
	count := map[Answer]int{}
	for _, ch := range results {
		h := recv(t, ch)
		if h.err != nil {
			t.Fatal(h.err)
		}
		count[h.o.Answer]++
	}
	if count[AnswerRun] != 1 || count[AnswerDuplicate] != n-1 {
		t.Fatalf("answers %v, want 1 run and %d duplicates", count, n-1)
	}
	var ran string
	queryRow(t, dsn, `SELECT ran FROM approval_requests WHERE id = '`+r.ID+`'`, &ran)
	var runs int
	queryRow(t, dsn, `SELECT count(*) FROM approval_events WHERE id = '`+r.ID+`' AND event = 'ran'`, &runs)
	if ran != "ran" || runs != 1 {
		t.Fatalf("stored ran %q with %d ran events, want ran once", ran, runs)
	}
}

// An approval once decided while no call is held is used by the agent's
// retry on any replica, by one retry only: of two retries on two replicas,
// one runs; the other does not (a duplicate, a new request when the first
// had used the approval already, as on one gateway, or a call whose short
// hold ended as the decision reached it).
func TestReplicasReadyOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	a, b := openReplica(t, dsn, nil), openReplica(t, dsn, nil)
	ctx, cancel := context.WithCancel(context.Background())
	h := hold(ctx, a, call("alice", "merge", `{"pr":7}`))
	r := pendingFor(t, a, "alice", "merge", 1)
	cancel()
	if o := recv(t, h); o.o.Answer != AnswerPending {
		t.Fatalf("the call that left: %+v", o)
	}
	mustDecide(t, a, r.ID, VerdictApprove, ForOnce)
	var wg sync.WaitGroup
	answers := make([]Outcome, 2)
	for i, g := range []*Gate{a, b} {
		wg.Go(func() {
			c := call("alice", "merge", `{"pr":7}`)
			c.HoldFor = time.Millisecond
			o, err := g.HoldCall(context.Background(), c)
			if err != nil {
				o.Answer, o.Reason = 0, err.Error()
			}
			answers[i] = o
		})
	}
	wg.Wait()
	runs := 0
	for _, o := range answers {
		if o.Answer == AnswerRun {
			runs++
		}
	}
	if runs != 1 || answers[0].Answer == AnswerRun && answers[0].RequestID != r.ID || answers[1].Answer == AnswerRun && answers[1].RequestID != r.ID {
		t.Fatalf("answers %+v: want exactly one run, under %s", answers, r.ID)
	}
}

// The per-principal cap counts pending requests across replicas.
func TestReplicasPendingCap(t *testing.T) {
	dsn := pgtest.DB(t)
	two := func(c *Config, _ *PostgresOptions) { c.MaxPending = 2 }
	a, b := openReplica(t, dsn, two), openReplica(t, dsn, two)
	hold(context.Background(), a, call("alice", "t1", `{}`))
	pendingFor(t, a, "alice", "t1", 1)
	hold(context.Background(), b, call("alice", "t2", `{}`))
	pendingFor(t, b, "alice", "t2", 1)
	o, err := a.HoldCall(context.Background(), call("alice", "t3", `{}`))
	if err != nil || o.Answer != AnswerRefused || !strings.Contains(o.Reason, "2 approval requests") {
		t.Fatalf("third request: %+v, %v; want refused, counting both replicas", o, err)
	}
	// Another principal is not counted.
	h := hold(context.Background(), b, call("bob", "t3", `{}`))
	pendingFor(t, b, "bob", "t3", 1)
	_ = h
}

// A replica that stops during a hold loses no request: the agent's retry
// on another replica folds into it, and the decision runs it there.
func TestReplicaStopsMidHold(t *testing.T) {
	dsn := pgtest.DB(t)
	a, b := openReplica(t, dsn, nil), openReplica(t, dsn, nil)
	h := hold(context.Background(), a, call("alice", "merge", `{"pr":3}`))
	r := pendingFor(t, a, "alice", "merge", 1)
	a.Close()
	if o := recv(t, h); o.o.Answer != AnswerTimedOut || o.o.Reason != gatewayStopped {
		t.Fatalf("the call held on the stopped replica: %+v", o)
	}
	h = hold(context.Background(), b, call("alice", "merge", `{"pr":3}`))
	waitingOn(t, r.ID, 1, b)
	if got, _ := b.Get(r.ID); got.Status != Pending || got.Calls != 2 {
		t.Fatalf("request after the retry: %s with %d calls, want pending with 2", got.Status, got.Calls)
	}
	mustDecide(t, b, r.ID, VerdictApprove, ForOnce)
	if o := recv(t, h); o.o.Answer != AnswerRun || o.o.RequestID != r.ID {
		t.Fatalf("the retried call: %+v", o)
	}
}

// proxy forwards TCP connections to target until it is stopped, which cuts
// every connection: the database as a gateway sees it go down.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	down   bool
	// blackhole holds connections open unanswered.
	blackhole bool
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setDown(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.blackhole {
				// Accepted, never answered: a database behind a
				// partition.
				p.conns = append(p.conns, c)
				p.mu.Unlock()
				continue
			}
			if p.down {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

// setBlackhole cuts every connection, and holds the new ones open without
// an answer while on.
func (p *proxy) setBlackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = on
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// syncLog is a log buffer safe for concurrent writes.
type syncLog struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{}
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if l.changed != nil {
		close(l.changed)
	}
	l.changed = make(chan struct{})
	return len(p), nil
}

// count is how many times the log holds s.
func (l *syncLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// waitFor waits until the log holds s.
func (l *syncLog) waitFor(t testing.TB, s string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		if strings.Contains(l.b.String(), s) {
			l.mu.Unlock()
			return
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the log never said %q:\n%s", s, l.b.String())
		}
	}
}

// With the database down, a call that needs a hold is refused at once with
// an error that says so (a request that cannot be recorded is not made),
// remembered approvals still let calls through, and the store reconnects
// by itself once the database is back, saying so in its log.
func TestPostgresDown(t *testing.T) {
	g, p, log, _ := proxiedReplica(t, 2*time.Second)
	rememberRead(t, g)

	p.setDown(true)
	log.waitFor(t, "lost the connection to the state database")
	start := time.Now()
	_, err := g.HoldCall(context.Background(), call("alice", "write", `{}`))
	if err == nil || !strings.Contains(err.Error(), "could not be recorded, so it was not made and the call did not run") {
		t.Fatalf("hold with the database down: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	if o, err := g.HoldCall(context.Background(), call("alice", "read", `{"x":1}`)); err != nil || o.Answer != AnswerRun {
		t.Fatalf("under a remembered approval with the database down: %+v, %v", o, err)
	}

	p.setDown(false)
	log.waitFor(t, "reconnected to the state database")
	h := hold(context.Background(), g, call("alice", "write", `{}`))
	r := pendingFor(t, g, "alice", "write", 1)
	mustDecide(t, g, r.ID, VerdictDeny, "")
	if o := recv(t, h); o.o.Answer != AnswerDenied {
		t.Fatalf("after the database came back: %+v", o)
	}
}

// proxiedReplica opens a replica on a database of its own (dsn, direct),
// its connections through a proxy the test can cut, its log in log, each
// operation timing out after timeout (the default when 0), the options
// changed by mutate then.
func proxiedReplica(t testing.TB, timeout time.Duration, mutate ...func(*PostgresOptions)) (g *Gate, p *proxy, log *syncLog, dsn string) {
	dsn = pgtest.DB(t)
	p = newProxy(t, "127.0.0.1:5432")
	log = &syncLog{}
	g = openReplica(t, strings.Replace(dsn, "127.0.0.1:5432", p.ln.Addr().String(), 1), func(_ *Config, o *PostgresOptions) {
		o.Logger = slogTo(log)
		if timeout > 0 {
			o.Timeout = timeout
		}
		for _, m := range mutate {
			m(o)
		}
	})
	return g, p, log, dsn
}

// rememberRead approves alice's read for an hour on g, by a call held and
// decided.
func rememberRead(t testing.TB, g *Gate) {
	t.Helper()
	h := hold(context.Background(), g, call("alice", "read", `{}`))
	r := pendingFor(t, g, "alice", "read", 1)
	mustDecide(t, g, r.ID, VerdictApprove, ForHour)
	recv(t, h)
}

// A call identical to one held on this replica is counted in the shared
// store like a new request: with the database down it is refused at once,
// not held for a request that no replica could release or count; the
// call already held is released as usual once the database is back.
func TestPostgresDownJoinRefused(t *testing.T) {
	g, p, log, dsn := proxiedReplica(t, 2*time.Second)
	h := hold(context.Background(), g, call("alice", "merge", `{"pr":7}`))
	r := pendingFor(t, g, "alice", "merge", 1)

	p.setDown(true)
	log.waitFor(t, "lost the connection to the state database")
	start := time.Now()
	_, err := g.HoldCall(context.Background(), call("alice", "merge", `{"pr":7}`))
	if err == nil || !strings.Contains(err.Error(), "could not be recorded, so it was not made and the call did not run") {
		t.Fatalf("an identical call with the database down: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	if got, _ := g.Get(r.ID); got.Calls != 1 {
		t.Fatalf("the refused call was counted: %d calls", got.Calls)
	}

	p.setDown(false)
	log.waitFor(t, "reconnected to the state database")
	h2 := hold(context.Background(), g, call("alice", "merge", `{"pr":7}`))
	waitingOn(t, r.ID, 2, g)
	var calls int
	queryRow(t, dsn, "SELECT (data->>'calls')::int FROM approval_requests WHERE id = '"+r.ID+"'", &calls)
	if calls != 2 {
		t.Fatalf("the store counts %d calls of the request, want 2", calls)
	}
	mustDecide(t, g, r.ID, VerdictApprove, ForOnce)
	first, second := recv(t, h), recv(t, h2)
	if first.o.Answer != AnswerRun || second.o.Answer != AnswerDuplicate {
		t.Fatalf("after the database came back: %+v, %+v", first.o, second.o)
	}
}

// A database that stops answering (a partition: connections accepted,
// nothing returned) refuses holds at once once the gateway knows it lost
// the database, new and identical calls alike, rather than after the
// operation's timeout with the gate's lock held; a remembered approval
// still lets calls through.
func TestPostgresUnansweredRefusedAtOnce(t *testing.T) {
	g, p, log, _ := proxiedReplica(t, 20*time.Second)
	rememberRead(t, g)
	h := hold(context.Background(), g, call("alice", "merge", `{"pr":7}`))
	pendingFor(t, g, "alice", "merge", 1)

	p.setBlackhole(true)
	log.waitFor(t, "lost the connection to the state database")
	for _, c := range []*Call{call("alice", "write", `{}`), call("alice", "merge", `{"pr":7}`)} {
		start := time.Now()
		_, err := g.HoldCall(context.Background(), c)
		if err == nil || !strings.Contains(err.Error(), "could not be recorded") {
			t.Errorf("%s with the database unanswering: %v", c.Tool, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: the refusal took %s", c.Tool, d)
		}
	}
	start := time.Now()
	if o, err := g.HoldCall(context.Background(), call("alice", "read", `{"x":1}`)); err != nil || o.Answer != AnswerRun {
		t.Errorf("under a remembered approval with the database unanswering: %+v, %v", o, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the call under a remembered approval took %s", d)
	}
	p.setBlackhole(false)
	log.waitFor(t, "reconnected to the state database")
	g.Close()
	recv(t, h)
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

const rollbackPolicy = `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}

mcp_servers: linear: access: tool: allow_list: ["echo"]
`

func servedTable(t testing.TB, serial uint64, policy string) *decide.Table {
	t.Helper()
	rt, err := decide.Load(policytest.Compile(t, policy, serial))
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// openPostgresStore opens a state database store, closed when the test ends.
func openPostgresStore(t *testing.T, o PostgresOptions) *PostgresStore {
	t.Helper()
	pg, err := OpenPostgres(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close)
	return pg
}

// A replica that starts serving under a name another live replica holds
// (another host or pid) warns: the replicas table keeps one row a name. A
// replica recording its own row again, or a name last heard of long ago,
// says nothing.
func TestReplicaNameTaken(t *testing.T) {
	dsn := pgtest.DB(t)
	log := &syncLog{}
	pg := openPostgresStore(t, PostgresOptions{DSN: dsn, Replica: "eu-1", Logger: slogTo(log)})
	ctx := context.Background()
	t1 := servedTable(t, 1, rollbackPolicy)
	if err := pg.Serving(ctx, t1); err != nil {
		t.Fatal(err)
	}
	if err := pg.Serving(ctx, t1); err != nil {
		t.Fatal(err)
	}
	const warning = "another live replica has this replica's name"
	if n := log.count(warning); n != 0 {
		t.Fatalf("its own row again: %d warnings", n)
	}
	// The row as another process of that name, elsewhere, wrote it.
	if _, err := pg.pool.Exec(ctx, `UPDATE replicas SET host = 'other-host', pid = 1, seen = clock_timestamp() WHERE name = 'eu-1'`); err != nil {
		t.Fatal(err)
	}
	if err := pg.Serving(ctx, t1); err != nil {
		t.Fatal(err)
	}
	if log.count(warning) != 1 || log.count("other_host=other-host other_pid=1") != 1 {
		t.Fatal("a live replica of the same name elsewhere: no warning naming it")
	}
	if _, err := pg.pool.Exec(ctx, `UPDATE replicas SET host = 'other-host', pid = 1, seen = clock_timestamp() - interval '1 hour' WHERE name = 'eu-1'`); err != nil {
		t.Fatal(err)
	}
	if err := pg.Serving(ctx, t1); err != nil {
		t.Fatal(err)
	}
	if n := log.count(warning); n != 1 {
		t.Fatalf("a name last heard of an hour ago: %d warnings in all, want the 1 before", n)
	}
}

// The rollback high-water mark is the fleet's: a replica refuses a table
// older than one another replica accepted, though it never saw that one;
// the same serial with other content is refused too; a read-only check
// records nothing. Each replica's serving table is shown by Status.
func TestSharedRollbackMark(t *testing.T) {
	dsn := pgtest.DB(t)
	a, b := openPostgresStore(t, PostgresOptions{DSN: dsn, Replica: "eu-1"}), openPostgresStore(t, PostgresOptions{DSN: dsn, Replica: "eu-2"})
	ctx := context.Background()
	t1, t2 := servedTable(t, 1, rollbackPolicy), servedTable(t, 2, rollbackPolicy)
	t2other := servedTable(t, 2, strings.Replace(rollbackPolicy, `"echo"`, `"echo", "search"`, 1))
	if err := b.AcceptTable(ctx, t1, false); err != nil {
		t.Fatal(err)
	}
	if err := b.Serving(ctx, t1); err != nil {
		t.Fatal(err)
	}
	if err := a.AcceptTable(ctx, t2, true); err != nil {
		t.Fatal(err)
	}
	if err := b.AcceptTable(ctx, t1, false); err != nil {
		t.Fatalf("after a read-only check of serial 2: %v", err)
	}
	if err := a.AcceptTable(ctx, t2, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Serving(ctx, t2); err != nil {
		t.Fatal(err)
	}
	err := b.AcceptTable(ctx, t1, false)
	if !errors.Is(err, decide.ErrRollback) || !strings.Contains(err.Error(), "table serial 1 is older than serial 2, accepted by replica eu-1") {
		t.Fatalf("rollback on the replica that never saw serial 2: %v", err)
	}
	if err := b.AcceptTable(ctx, t2, false); err != nil {
		t.Fatalf("serial 2 again: %v", err)
	}
	if err := b.AcceptTable(ctx, t2other, false); !errors.Is(err, decide.ErrRollback) || !strings.Contains(err.Error(), "its content differs") {
		t.Fatalf("other content at serial 2: %v", err)
	}
	replicas, accepted, _, err := a.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(replicas) != 2 || replicas[0].Name != "eu-1" || replicas[0].Serial != 2 || replicas[1].Name != "eu-2" || replicas[1].Serial != 1 {
		t.Fatalf("replicas %+v", replicas)
	}
	if accepted == nil || accepted.Serial != 2 || accepted.By != "eu-1" || accepted.Digest != t2.Digest() {
		t.Fatalf("accepted %+v", accepted)
	}
}

// Two replicas accepting the first table at once are ordered: the one
// that read an empty mark and writes after the other accepted a newer
// serial does not write the mark back to its older one.
func TestSharedRollbackMarkFirstAcceptRace(t *testing.T) {
	dsn := pgtest.DB(t)
	// The older replica's transaction stays open while the newer one's
	// waits: longer than the default timeout, on a loaded machine.
	older := openPostgresStore(t, PostgresOptions{DSN: dsn, Replica: "eu-1", Timeout: time.Minute})
	newer := openPostgresStore(t, PostgresOptions{DSN: dsn, Replica: "eu-2", Timeout: time.Minute})
	ctx := context.Background()
	t1, t2 := servedTable(t, 1, rollbackPolicy), servedTable(t, 2, rollbackPolicy)
	watch, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	newerDone := make(chan error, 1)
	older.acceptRead = func() {
		older.acceptRead = nil
		// The newer replica accepts serial 2 while this one holds what it
		// read: it either finishes (nothing orders the two) or waits.
		go func() { newerDone <- newer.AcceptTable(ctx, t2, false) }()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case err := <-newerDone:
				newerDone <- err
				return
			default:
			}
			var waiting int
			if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&waiting); err != nil {
				t.Error(err)
				return
			}
			if waiting > 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Error("the newer replica's accept neither finished nor waited")
	}
	if err := older.AcceptTable(ctx, t1, false); err != nil {
		t.Fatalf("serial 1, accepted first: %v", err)
	}
	if err := <-newerDone; err != nil {
		t.Fatalf("serial 2, accepted after serial 1: %v", err)
	}
	_, accepted, _, err := older.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if accepted == nil || accepted.Serial != 2 || accepted.By != "eu-2" {
		t.Fatalf("after both accepts the mark is %+v, want serial 2 by eu-2", accepted)
	}
	if err := older.AcceptTable(ctx, t1, false); !errors.Is(err, decide.ErrRollback) {
		t.Fatalf("serial 1 after serial 2: %v", err)
	}
}

// A webhook delivery is recorded though a call on another replica joined
// the request while it was being delivered (the request's revision moved
// on), and every replica sees it.
func TestReplicaWebhookDeliveryAfterJoin(t *testing.T) {
	dsn := pgtest.DB(t)
	rc := &receiver{secret: testSecret}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		rc.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	hooked := func(c *Config, _ *PostgresOptions) {
		c.Webhook = WebhookOptions{Secret: testSecret, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Attempts: 4}
	}
	a, b := openReplica(t, dsn, hooked), openReplica(t, dsn, hooked)
	hook := Channel{Name: "hook", Kind: ChannelWebhook, URL: srv.URL}
	c := call("alice", "merge", `{"pr":5}`)
	c.Channel = hook
	hold(context.Background(), a, c)
	r := pendingFor(t, a, "alice", "merge", 1)
	pendingOn(t, b, "alice", "merge")
	hold(context.Background(), b, c)
	waitingOn(t, r.ID, 2, a, b)
	close(release)
	if d := waitDelivery(t, b, r.ID); d.State != "delivered" {
		t.Fatalf("delivery as b sees it: %+v", d)
	}
	var events string
	queryRow(t, dsn, `SELECT string_agg(event, ',' ORDER BY seq) FROM approval_events WHERE id = '`+r.ID+`'`, &events)
	if events != "requested,notified" {
		t.Fatalf("audit events %q, want requested,notified", events)
	}
}

// waitUntil waits until ok holds for g, looking again at each change.
func waitUntil(t testing.TB, g *Gate, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := g.Changed()
		if ok() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("never: %s", what)
		}
	}
}

// An approval for a duration given on one replica lets the principal's
// later calls through on every replica; revoked on another, it ends on all.
// Consent is shared the same way.
func TestReplicaGrantsAndRevocations(t *testing.T) {
	dsn := pgtest.DB(t)
	a, b := openReplica(t, dsn, nil), openReplica(t, dsn, nil)
	h := hold(context.Background(), a, call("alice", "deploy", `{"env":"staging"}`))
	r := pendingOn(t, b, "alice", "deploy")
	mustDecide(t, b, r.ID, VerdictApprove, ForHour)
	if o := recv(t, h); o.o.Answer != AnswerRun {
		t.Fatalf("held call on a: %+v", o)
	}
	waitUntil(t, b, "b knows the approval in force", func() bool { return len(b.List(Filter{Active: true})) == 1 })
	if o, err := b.HoldCall(context.Background(), call("alice", "deploy", `{"env":"prod"}`)); err != nil || o.Answer != AnswerRun || o.RequestID != r.ID {
		t.Fatalf("on b under the approval: %+v, %v", o, err)
	}
	if _, err := a.Revoke(r.ID, Approver{Name: "carol", From: "test"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, b, "b knows the revocation", func() bool { return len(b.List(Filter{Active: true})) == 0 })
	c := call("alice", "deploy", `{"env":"prod"}`)
	c.HoldFor = time.Millisecond
	if o, err := b.HoldCall(context.Background(), c); err != nil || o.Answer != AnswerPending {
		t.Fatalf("on b after the revocation on a: %+v, %v; want a new request", o, err)
	}

	cc := &ConsentCall{Principal: "alice", Server: "github", URI: "ui://github/app.html", Channel: pageChannel}
	done := make(chan bool, 1)
	go func() {
		ok, _, _ := a.Consent(context.Background(), cc)
		done <- ok
	}()
	var cr Request
	waitUntil(t, b, "b lists the consent request", func() bool {
		for _, q := range b.List(Filter{Status: Pending}) {
			if q.Kind == KindConsent {
				cr = q
				return true
			}
		}
		return false
	})
	if _, err := b.Decide(cr.ID, VerdictApprove, "", "", Approver{Name: "carol", From: "test"}); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("the read held on a was not granted by the consent given on b")
	}
	waitUntil(t, b, "b remembers the consent", func() bool { return len(b.List(Filter{Active: true})) == 1 })
	if ok, _, err := b.Consent(context.Background(), cc); !ok || err != nil {
		t.Fatalf("b's read under the remembered consent: %v %v", ok, err)
	}
}

// A decision made on another replica while this one was cut off from the
// database reaches the call held here once it reconnects: it reads again
// what changed meanwhile.
func TestPostgresDecidedWhileCutOff(t *testing.T) {
	a, p, log, dsn := proxiedReplica(t, 0, func(o *PostgresOptions) {
		o.Resync = time.Hour // only the reconnection reads again
	})
	b := openReplica(t, dsn, nil)
	h := hold(context.Background(), a, call("alice", "merge", `{"pr":11}`))
	r := pendingOn(t, b, "alice", "merge")
	waitingOn(t, r.ID, 1, a)
	p.setDown(true)
	log.waitFor(t, "lost the connection to the state database")
	mustDecide(t, b, r.ID, VerdictApprove, ForOnce)
	still(t, a, r.ID, h)
	p.setDown(false)
	log.waitFor(t, "reconnected to the state database")
	if o := recv(t, h); o.err != nil || o.o.Answer != AnswerRun {
		t.Fatalf("the call held on a: %+v", o)
	}
}

// A replica that lost its state database answers the admin API's request
// endpoints 503, saying so, not an empty list or a 404 for requests other
// replicas know; once it is back it answers again.
func TestAdminAPIDatabaseDown(t *testing.T) {
	g, p, log, _ := proxiedReplica(t, 2*time.Second)
	srv := adminServer(t, g)
	h := hold(context.Background(), g, call("alice", "merge", `{"pr":7}`))
	r := pendingFor(t, g, "alice", "merge", 1)

	p.setDown(true)
	log.waitFor(t, "lost the connection to the state database")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/requests?status=pending", ""},
		{"GET", "/api/v1/requests/" + r.ID, ""},
		{"GET", "/api/v1/requests/apr-madeelsewhere", ""},
		{"POST", "/api/v1/requests/" + r.ID + "/approve", `{"for":"once"}`},
	} {
		var e ErrorBody
		if st := apiCall(t, srv, carolToken, c.method, c.path, c.body, &e); st != http.StatusServiceUnavailable || e.Status != st ||
			!strings.Contains(e.Error, "the state database is unavailable on this replica: ask another replica, or wait") {
			t.Errorf("%s %s with the database down: %d %+v", c.method, c.path, st, e)
		}
	}

	// The page shows what it has, saying it may miss requests.
	b := newBrowser(t, srv)
	if st, _, _ := b.do("POST", "/login", url.Values{"token": {carolToken}}, nil); st != http.StatusSeeOther {
		t.Fatalf("sign-in with the database down: %d", st)
	}
	for _, path := range []string{"/approvals", "/approvals/" + r.ID, "/approvals/apr-madeelsewhere"} {
		if st, body, _ := b.do("GET", path, nil, nil); st != http.StatusServiceUnavailable || !strings.Contains(body, "The state database is unavailable on this replica") {
			t.Errorf("page %s with the database down: %d\n%s", path, st, body)
		}
	}

	p.setDown(false)
	log.waitFor(t, "reconnected to the state database")
	if st, body, _ := b.do("GET", "/approvals", nil, nil); st != http.StatusOK || strings.Contains(body, "The state database is unavailable") {
		t.Errorf("page after the database came back: %d", st)
	}
	var list ListView
	if st := apiCall(t, srv, carolToken, "GET", "/api/v1/requests?status=pending", "", &list); st != http.StatusOK || len(list.Requests) != 1 {
		t.Fatalf("list after the database came back: %d %+v", st, list)
	}
	g.Close()
	recv(t, h)
}
