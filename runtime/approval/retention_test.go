package approval

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/policyc/policyc/internal/pgtest"
)

const day = 24 * time.Hour

// decided makes a request of principal alice for tool on g, decides it
// with verdict and forWhat, and returns it once its held call is answered.
func decided(t *testing.T, g *Gate, tool, verdict, forWhat string) Request {
	t.Helper()
	ch := hold(context.Background(), g, call("alice", tool, `{}`))
	r := pendingFor(t, g, "alice", tool, 1)
	mustDecide(t, g, r.ID, verdict, forWhat)
	recv(t, ch)
	return r
}

// consented gives alice's read of uri on g a remembered consent.
func consented(t *testing.T, g *Gate, uri string) Request {
	t.Helper()
	cc := &ConsentCall{Principal: "alice", Server: "github", URI: uri, Channel: pageChannel}
	done := make(chan bool, 1)
	go func() {
		ok, _, _ := g.Consent(context.Background(), cc)
		done <- ok
	}()
	r := pendingWhere(t, g, func(r Request) bool { return r.Kind == KindConsent && r.URI == uri && g.Waiting(r.ID) > 0 })
	mustDecide(t, g, r.ID, VerdictApprove, "")
	if !<-done {
		t.Fatalf("the read of %s was not granted by its consent", uri)
	}
	return r
}

// known reports which of reqs g has, by tool or URI, as "name=true|false".
func known(g *Gate, reqs ...Request) string {
	var b strings.Builder
	for _, r := range reqs {
		_, ok := g.Get(r.ID)
		name := r.Tool
		if name == "" {
			name = r.URI
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(name)
		if ok {
			b.WriteString("=kept")
		} else {
			b.WriteString("=gone")
		}
	}
	return b.String()
}

// A running gate lets go of the requests finished more than the retention
// (30 days) ago as it makes new ones, in memory and in its state file; the
// audit log keeps them, and what is in force stays however old. Without it
// a gateway running for months kept every request since it started.
func TestRetentionWhileRunning(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	g := openGate(t, dir, func(c *Config) { c.Now = clk.Now })
	denied := decided(t, g, "delete_repo", VerdictDeny, "")
	once := decided(t, g, "close_issue", VerdictApprove, ForOnce)
	week := decided(t, g, "create_issue", VerdictApprove, ForWeek)
	consent := consented(t, g, "ui://github/app.html")
	all := []Request{denied, once, week, consent}

	clk.Add(29 * day)
	decided(t, g, "fork", VerdictDeny, "") // the gate looks as it makes a request
	if got, want := known(g, all...), "delete_repo=kept close_issue=kept create_issue=kept ui://github/app.html=kept"; got != want {
		t.Fatalf("after 29 days: %s, want %s", got, want)
	}

	// 31 days on, the denial and the approval once are past the
	// retention; the week's approval ended 24 days ago.
	clk.Add(2 * day)
	fresh := decided(t, g, "star", VerdictDeny, "")
	if got, want := known(g, all...), "delete_repo=gone close_issue=gone create_issue=kept ui://github/app.html=kept"; got != want {
		t.Fatalf("after 31 days: %s, want %s", got, want)
	}
	state := readFile(t, dir, StateFile)
	for _, r := range []Request{denied, once} {
		if strings.Contains(state, r.ID) {
			t.Errorf("the state file still holds %s (%s) 31 days after it finished", r.ID, r.Tool)
		}
	}
	for _, r := range []Request{week, consent, fresh} {
		if !strings.Contains(state, r.ID) {
			t.Errorf("the state file lost %s (%s)", r.ID, r.Tool)
		}
	}
	audit := readFile(t, dir, AuditFile)
	for _, r := range all {
		if !strings.Contains(audit, `"id":"`+r.ID+`"`) {
			t.Errorf("the audit log lost %s (%s)", r.ID, r.Tool)
		}
	}

	// 38 days on: the week's approval ended 31 days ago; the remembered
	// consent stands until revoked.
	clk.Add(7 * day)
	decided(t, g, "watch", VerdictDeny, "")
	if got, want := known(g, all...), "delete_repo=gone close_issue=gone create_issue=gone ui://github/app.html=kept"; got != want {
		t.Fatalf("after 38 days: %s, want %s", got, want)
	}
	if ok, _, err := g.Consent(context.Background(), &ConsentCall{Principal: "alice", Server: "github", URI: consent.URI, Channel: pageChannel}); !ok || err != nil {
		t.Fatalf("a read under the remembered consent after 38 days: %v, %v", ok, err)
	}

	// A restart reads what the running gate wrote.
	g.Close()
	g2 := openGate(t, dir, func(c *Config) { c.Now = clk.Now })
	if got, want := known(g2, append(all, fresh)...), "delete_repo=gone close_issue=gone create_issue=gone ui://github/app.html=kept star=kept"; got != want {
		t.Fatalf("after a restart: %s, want %s", got, want)
	}
}

// The state file is compacted as the gate looks, once it holds more lines
// of changes than requests: each request is then one line.
func TestRetentionCompactsStateFile(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	g := openGate(t, dir, func(c *Config) { c.Now = clk.Now })
	var reqs []Request
	for _, tool := range []string{"a", "b", "c"} {
		reqs = append(reqs, decided(t, g, tool, VerdictApprove, ForOnce))
	}
	if n := strings.Count(readFile(t, dir, StateFile), "\n"); n <= len(reqs) {
		t.Fatalf("the state file has %d lines for %d requests made, decided and used; want more before compaction", n, len(reqs))
	}
	clk.Add(2 * time.Hour)
	ch := hold(context.Background(), g, call("alice", "d", `{}`))
	pendingFor(t, g, "alice", "d", 1)
	state := readFile(t, dir, StateFile)
	if n := strings.Count(state, "\n"); n != len(reqs)+1 {
		t.Errorf("the state file has %d lines after compaction, want %d (one per request):\n%s", n, len(reqs)+1, state)
	}
	for _, r := range reqs {
		if !strings.Contains(state, r.ID) {
			t.Errorf("compaction lost %s", r.ID)
		}
	}
	g.Close()
	recv(t, ch)
	g2 := openGate(t, dir, func(c *Config) { c.Now = clk.Now })
	for _, r := range reqs {
		if got, ok := g2.Get(r.ID); !ok || got.Ran != "ran" {
			t.Errorf("after compaction and a restart, %s: %+v (%v)", r.Tool, got, ok)
		}
	}
}

// rowGone waits until the database at dsn holds no request id, which a
// replica deletes in the background, and fails with msg if it still does
// after 20 s.
func rowGone(t testing.TB, dsn, id, msg string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var rows int
		queryRow(t, dsn, `SELECT count(*) FROM approval_requests WHERE id = '`+id+`'`, &rows)
		if rows == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
	}
}

// exec runs sql on the database at dsn.
func exec(t testing.TB, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// On a shared store, finished requests stay for the retention across a
// replica's restart, as in the file store (they were deleted at every
// start), and past it each replica lets go of them as requests arrive,
// and the rows are deleted.
func TestReplicaRetention(t *testing.T) {
	dsn := pgtest.DB(t)
	clk := newClock()
	withClock := func(c *Config, _ *PostgresOptions) { c.Now = clk.Now }
	a, b := openReplica(t, dsn, withClock), openReplica(t, dsn, withClock)
	denied := decided(t, a, "delete_repo", VerdictDeny, "")
	week := decided(t, a, "create_issue", VerdictApprove, ForWeek)
	deniedNow, _ := a.Get(denied.ID)
	waitUntil(t, b, "b knows both decisions", func() bool { return len(b.List(Filter{Status: Denied})) == 1 && len(b.List(Filter{Active: true})) == 1 })

	clk.Add(day)
	c := openReplica(t, dsn, withClock)
	if got, want := known(c, denied, week), "delete_repo=kept create_issue=kept"; got != want {
		t.Fatalf("a replica started a day later: %s, want %s", got, want)
	}

	// 31 days on for the gateways; the database, which deletes by its own
	// clock, sees its rows' ends moved as far back.
	clk.Add(30 * day)
	exec(t, dsn, `UPDATE approval_requests SET keep_until = keep_until - interval '31 days'`)
	decided(t, a, "fork", VerdictDeny, "")
	if got, want := known(a, denied, week), "delete_repo=gone create_issue=kept"; got != want {
		t.Fatalf("31 days on, replica a: %s, want %s", got, want)
	}
	rowGone(t, dsn, denied.ID, "the denial's row is still in the database 31 days after it") // deleted in the background
	var rows int
	queryRow(t, dsn, `SELECT count(*) FROM approval_events WHERE id = '`+denied.ID+`'`, &rows)
	if rows == 0 {
		t.Errorf("the audit log lost the denial")
	}
	// b learns of a's new request, and looks too.
	waitUntil(t, b, "b lets go of the denial", func() bool { _, ok := b.Get(denied.ID); return !ok })
	if _, ok := b.Get(week.ID); !ok {
		t.Error("b let go of the week's approval, which ended 24 days ago")
	}
	// A late notice of it (read before the row went) does not bring it back.
	b.applyRemote(&deniedNow)
	if _, ok := b.Get(denied.ID); ok {
		t.Error("a late change of a request past its retention brought it back to b")
	}
}

// A replica deletes the requests past their retention in the background:
// a deletion that waits (here on a row another transaction holds, as it
// would on a long scan) holds up none of the gate's work, which goes on
// from memory and the database; once the row is let go, it is deleted.
func TestReplicaPruneInBackground(t *testing.T) {
	dsn := pgtest.DB(t)
	clk := newClock()
	slow := func(c *Config, o *PostgresOptions) { c.Now, o.Timeout = clk.Now, time.Minute }
	a, b := openReplica(t, dsn, slow), openReplica(t, dsn, slow)
	denied := decided(t, a, "delete_repo", VerdictDeny, "")
	clk.Add(31 * day)
	exec(t, dsn, `UPDATE approval_requests SET keep_until = keep_until - interval '31 days'`)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM approval_requests WHERE id = $1 FOR UPDATE`, denied.ID); err != nil {
		t.Fatal(err)
	}

	// b's request reaches a, which looks and starts the deletion; a goes
	// on answering while the deletion waits.
	held := hold(context.Background(), b, call("alice", "fork", `{}`))
	r := pendingOn(t, a, "alice", "fork")
	if _, ok := a.Get(denied.ID); ok {
		t.Error("a kept the denial in memory 31 days after it")
	}
	mustDecide(t, a, r.ID, VerdictDeny, "")
	recv(t, held)

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	rowGone(t, dsn, denied.ID, "the denial's row was not deleted once the other transaction let it go")
}
