package approval

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/policyc/policyc/runtime/gateway"
)

// migrations are the state database's schema, one numbered file per
// version, applied in order.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock taken while migrating.
const migrationLock int64 = 0x706f6c696379 // "policy"

// acceptLock is the advisory lock a replica holds while it checks and
// records the accepted table, so that two replicas accepting their first
// table at once are ordered (a row lock cannot order them: there is no
// row yet).
const acceptLock int64 = 0x706f6c696375 // "policu"

// notifyChannel is the channel every change of a request is notified on,
// with the request's id as payload.
const notifyChannel = "policyc_approvals"

// PostgresOptions configure a PostgresStore.
type PostgresOptions struct {
	// DSN is the database's connection string (a URL or key=value pairs).
	DSN string
	// Replica names this gateway in the replicas table; empty means the
	// host name and process id.
	Replica string
	// Logger receives the store's operational messages (a lost or
	// restored connection). Nil discards them.
	Logger *slog.Logger
	// Resync is how often the requests changed lately are read again, in
	// case a notification was missed. Default 5s.
	Resync time.Duration
	// Timeout bounds each database operation, so that a gateway whose
	// database is unreachable answers at once. Default 5s.
	Timeout time.Duration
	// noListen leaves notifications off: changes arrive by resync alone.
	noListen bool
}

// PostgresStore keeps the gate's state in PostgreSQL, shared by every
// gateway replica that opens the same database: requests and the audit
// log, the last accepted table and what each replica serves. A change made
// by one replica reaches the others by LISTEN/NOTIFY, and by a periodic
// re-read of the requests changed lately.
type PostgresStore struct {
	pool    *pgxpool.Pool
	listen  *pgx.ConnConfig
	key     []byte
	replica string
	started time.Time
	logger  *slog.Logger
	resync  time.Duration
	timeout time.Duration
	noListn bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// apply is told each request another replica changed (the gate's
	// applyRemote); nil until the gate starts watching.
	apply func(*Request)
	// since is the database's clock at the last resync, less a margin.
	since time.Time
	// down is set while the notification connection is lost.
	down bool
	// closed is set by close: no deletion starts after it.
	closed bool
	// pruning is set while a prune's deletion runs.
	pruning bool

	// acceptRead, in tests, runs after AcceptTable read the accepted
	// table and before it writes.
	acceptRead func()
}

// Schema versions this build knows.
var schemaVersion = func() int64 {
	var v int64
	fs.WalkDir(migrations, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			var n int64
			if _, err := fmt.Sscanf(d.Name(), "%05d_", &n); err == nil && n > v {
				v = n
			}
		}
		return nil
	})
	return v
}()

// OpenPostgres connects to the state database and brings its schema up to
// date under an advisory lock (so that replicas starting together migrate
// once). A database whose schema is newer than this build is refused.
func OpenPostgres(ctx context.Context, o PostgresOptions) (*PostgresStore, error) {
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		return nil, fmt.Errorf("the state database's connection string: %v", redact(err))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	s := &PostgresStore{listen: cfg.ConnConfig.Copy(), replica: o.Replica, logger: o.Logger, resync: o.Resync, timeout: o.Timeout, noListn: o.noListen, started: time.Now()}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.resync <= 0 {
		s.resync = 5 * time.Second
	}
	if s.timeout <= 0 {
		s.timeout = 5 * time.Second
	}
	if s.replica == "" {
		host, _ := os.Hostname()
		s.replica = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("connect to the state database: %v", redact(err))
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	if err := s.loadKey(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// redact drops a connection error's details that could carry a password.
func redact(err error) error {
	var pe *pgconn.ConnectError
	if errors.As(err, &pe) {
		return errors.Unwrap(pe)
	}
	return err
}

func (s *PostgresStore) migrate(ctx context.Context) error {
	// Replicas starting together migrate one at a time: the first applies
	// what is missing, the others find nothing to do. The lock is the
	// session's, held on a connection of its own while migrating.
	lockConn, err := s.pool.Acquire(ctx)
	if err != nil {
		return dbError(err)
	}
	defer lockConn.Release()
	if _, err := lockConn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return dbError(err)
	}
	defer lockConn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, migrationLock)
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	sub, _ := fs.Sub(migrations, "migrations")
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithTableName("policyc_schema"))
	if err != nil {
		return fmt.Errorf("the state database's migrations: %v", err)
	}
	newer := func() error {
		cur, err := p.GetDBVersion(ctx)
		if err != nil {
			return fmt.Errorf("read the state database's schema version: %v", redact(err))
		}
		if cur > schemaVersion {
			return fmt.Errorf("the state database's schema is version %d, newer than this gateway's (%d): another gateway of a newer release migrated it; run that release (or a newer one) on every replica, since an older gateway cannot keep state it does not know", cur, schemaVersion)
		}
		return nil
	}
	if err := newer(); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		if err := newer(); err != nil {
			return err
		}
		return fmt.Errorf("migrate the state database: %v", redact(err))
	}
	return nil
}

// loadKey reads the key of the fold hash, made by the first gateway.
func (s *PostgresStore) loadKey(ctx context.Context) error {
	k := make([]byte, 32)
	rand.Read(k)
	if _, err := s.pool.Exec(ctx, `INSERT INTO state_key (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, k); err != nil {
		return fmt.Errorf("the state database: %v", redact(err))
	}
	if err := s.pool.QueryRow(ctx, `SELECT key FROM state_key WHERE id = 1`).Scan(&s.key); err != nil {
		return fmt.Errorf("the state database: %v", redact(err))
	}
	return nil
}

// Replica is the name this gateway goes by in the replicas table.
func (s *PostgresStore) Replica() string { return s.replica }

// fold is the keyed hash identical requests fold by. The fingerprint of
// the arguments never reaches the database as it is: only this hash does.
func (s *PostgresStore) fold(k foldKey) string {
	m := hmac.New(sha256.New, s.key)
	for _, p := range []string{string(k.kind), k.principal, k.server, k.name, k.fingerprt} {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return "h:" + hex.EncodeToString(m.Sum(nil))
}

func (s *PostgresStore) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.timeout)
}

// dbError words a failed operation on the state database.
func dbError(err error) error {
	return fmt.Errorf("the state database: %v", redact(err))
}

// row columns of a request, from r.
func rowOf(r *Request) (data []byte, once bool, keep *time.Time, err error) {
	if data, err = json.Marshal(r); err != nil {
		return nil, false, nil, err
	}
	once = r.Status == Approved && r.Decision != nil && r.Decision.For == ForOnce
	if !r.keptForGood() {
		t := r.finished()
		if r.Status == Pending {
			t = r.Expires
		}
		keep = &t
	}
	return data, once, keep, nil
}

// keptForGood reports a consent remembered until revoked: it is never
// deleted while it stands.
func (r *Request) keptForGood() bool {
	d := r.Decision
	return r.Status == Approved && d != nil && d.For == ForRemember && d.Revoked == nil
}

func eventOf(ev *Event) (at time.Time, what string, data []byte) {
	if ev == nil {
		return time.Time{}, "", []byte("null")
	}
	b, _ := json.Marshal(ev)
	return ev.Time, ev.Event, b
}

func scanRequest(row pgx.Row) (*Request, error) {
	var data []byte
	var rev int64
	var fold string
	if err := row.Scan(&data, &rev, &fold); err != nil {
		return nil, err
	}
	r := new(Request)
	if err := json.Unmarshal(data, r); err != nil {
		return nil, err
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	r.rev, r.Fingerprint = rev, fold
	return r, nil
}

func (s *PostgresStore) put(r *Request, ev *Event) error {
	ctx, cancel := s.op()
	defer cancel()
	data, once, keep, err := rowOf(r)
	if err != nil {
		return err
	}
	at, what, evData := eventOf(ev)
	var rev int64
	err = s.pool.QueryRow(ctx, `WITH u AS (
		UPDATE approval_requests SET status = $2, ran = $3, once = $4, keep_until = $5, data = $6, rev = rev + 1, updated = clock_timestamp()
		WHERE id = $1 AND rev = $7 RETURNING rev
	), e AS (
		INSERT INTO approval_events (time, id, event, data) SELECT $8, $1, $9, $10 FROM u WHERE $9 <> ''
	) SELECT rev FROM u`, r.ID, string(r.Status), r.Ran, once, keep, data, r.rev, at, what, evData).Scan(&rev)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, err := s.get(ctx, r.ID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return dbError(err)
		}
		return &staleError{cur: cur}
	}
	if err != nil {
		return dbError(err)
	}
	r.rev = rev
	return nil
}

func (s *PostgresStore) get(ctx context.Context, id string) (*Request, error) {
	return scanRequest(s.pool.QueryRow(ctx, `SELECT data, rev, fold FROM approval_requests WHERE id = $1`, id))
}

func (s *PostgresStore) logEvent(ev *Event) error {
	ctx, cancel := s.op()
	defer cancel()
	at, what, data := eventOf(ev)
	if _, err := s.pool.Exec(ctx, `INSERT INTO approval_events (time, id, event, data) VALUES ($1, $2, $3, $4)`, at, ev.ID, what, data); err != nil {
		return dbError(err)
	}
	return nil
}

// failed is nil: a shared store has no lasting failure; each change that
// cannot be recorded says why.
func (s *PostgresStore) failed() error { return nil }

// close stops watching and deleting; the pool stays open for Close.
func (s *PostgresStore) close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// Close closes the store's connections. The gate's Close does not: the
// command closes the store after the gate and its table hooks are done.
func (s *PostgresStore) Close() {
	s.close()
	s.pool.Close()
}

// load deletes the requests finished more than retention ago and returns
// the others.
func (s *PostgresStore) load(retention time.Duration) ([]*Request, error) {
	ctx, cancel := context.WithTimeout(s.ctx, tableTimeout)
	defer cancel()
	if err := s.deletePast(ctx, retention); err != nil {
		return nil, err
	}
	// The first resync reads what changed since, by the database's clock
	// (the gateway's may be off).
	var dbNow time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&dbNow); err != nil {
		return nil, dbError(err)
	}
	s.mu.Lock()
	s.since = dbNow.Add(-time.Minute)
	s.mu.Unlock()
	return s.query(ctx, `SELECT data, rev, fold FROM approval_requests`)
}

// tableTimeout bounds the operations on every request kept (a month's):
// the load at start and the deletion past the retention. No call waits on
// them, and a scan of a large table may take longer than an operation's
// timeout.
const tableTimeout = 10 * time.Minute

// prune deletes the requests finished more than retention ago. Any replica
// may: each drops the same ones from memory by the same rule. The
// deletion runs in the background, one at a time, its failure logged: the
// gate calls prune holding its lock, and a DELETE that scans a month of
// requests (keep_until has no index) must not hold up every decision.
func (s *PostgresStore) prune(_ []*Request, retention time.Duration) error {
	if err := s.lost(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.pruning {
		return nil
	}
	s.pruning = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, tableTimeout)
		defer cancel()
		err := s.deletePast(ctx, retention)
		s.mu.Lock()
		s.pruning = false
		s.mu.Unlock()
		if err != nil && s.ctx.Err() == nil {
			s.logger.Warn("deleting the approval requests past their retention failed; the next try is in an hour", "error", err.Error())
		}
	}()
	return nil
}

// deletePast deletes the requests finished more than retention ago, by the
// database's clock: a replica whose clock runs fast does not delete what
// the others keep. A remembered consent that stands has no keep_until, and
// is never deleted.
func (s *PostgresStore) deletePast(ctx context.Context, retention time.Duration) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM approval_requests WHERE status <> 'pending' AND keep_until < clock_timestamp() - make_interval(secs => $1)`, retention.Seconds()); err != nil {
		return dbError(err)
	}
	return nil
}

func (s *PostgresStore) query(ctx context.Context, sql string, args ...any) ([]*Request, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []*Request
	for rows.Next() {
		r, err := scanRequest(rows)
		if err != nil {
			return nil, fmt.Errorf("the state database holds a request this gateway cannot read: %v", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err)
	}
	return out, nil
}

// claim is what createOrJoin found or made.
type claim struct {
	// joined is the pending request of the same call, which now counts
	// one more call; made the request created; ready an approval once of
	// the same call that no call used yet.
	joined, made, ready *Request
	// pending is the principal's pending requests, when the cap refused.
	pending int
}

// createOrJoin makes r (pending, with r.Fingerprint the fold hash) unless
// another replica's pending request of the same call exists, which it
// joins, or an unused approval once of it, which it returns. Requests are
// made one principal at a time: maxPending (0 for no cap) counts that
// principal's pending requests across replicas.
func (s *PostgresStore) createOrJoin(r *Request, maxPending int, ev *Event, now time.Time) (claim, error) {
	if err := s.lost(); err != nil {
		return claim{}, err
	}
	ctx, cancel := s.op()
	defer cancel()
	var c claim
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 23))`, r.Principal); err != nil {
			return err
		}
		found, err := scanRequest(tx.QueryRow(ctx, `SELECT data, rev, fold FROM approval_requests
			WHERE fold = $1 AND (status = 'pending' AND expires > $2 OR status = 'approved' AND once AND ran = '')
			ORDER BY status = 'pending' DESC, updated DESC LIMIT 1 FOR UPDATE`, r.Fingerprint, now))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case found.Status == Pending:
			var data []byte
			if err := tx.QueryRow(ctx, `UPDATE approval_requests SET data = jsonb_set(data, '{calls}', to_jsonb((data->>'calls')::int + 1)), rev = rev + 1, updated = clock_timestamp()
				WHERE id = $1 RETURNING data, rev`, found.ID).Scan(&data, &found.rev); err != nil {
				return err
			}
			found.Calls++
			c.joined = found
			return nil
		default:
			c.ready = found
			return nil
		}
		if maxPending > 0 {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM approval_requests WHERE principal = $1 AND status = 'pending' AND expires > $2`, r.Principal, now).Scan(&n); err != nil {
				return err
			}
			if n >= maxPending {
				c.pending = n
				return nil
			}
		}
		data, once, keep, err := rowOf(r)
		if err != nil {
			return err
		}
		// A pending request past its expiry that no replica expired (every
		// one holding it stopped) no longer folds anything.
		if _, err := tx.Exec(ctx, `UPDATE approval_requests SET status = 'expired', data = jsonb_set(jsonb_set(jsonb_set(data, '{status}', '"expired"'), '{ended}', to_jsonb($2::timestamptz)), '{end}', to_jsonb($3::text)), keep_until = $2, rev = rev + 1, updated = clock_timestamp()
			WHERE fold = $1 AND status = 'pending' AND expires <= $2`, r.Fingerprint, now, noDecision); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO approval_requests (id, kind, status, principal, fold, once, ran, expires, keep_until, data)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, r.ID, string(r.Kind), string(r.Status), r.Principal, r.Fingerprint, once, r.Ran, r.Expires, keep, data); err != nil {
			return err
		}
		at, what, evData := eventOf(ev)
		if _, err := tx.Exec(ctx, `INSERT INTO approval_events (time, id, event, data) VALUES ($1, $2, $3, $4)`, at, r.ID, what, evData); err != nil {
			return err
		}
		r.rev = 1
		c.made = r
		return nil
	})
	if err != nil {
		return claim{}, dbError(err)
	}
	return c, nil
}

// join counts one more call of the pending request id, made or joined by
// this replica before. It reports false when the request is no longer
// pending (decided or expired elsewhere). A call that joins is recorded
// like one that makes a request: with the database unreachable it is
// refused, not held for a request no replica could release.
func (s *PostgresStore) join(id string) (rev int64, pending bool, err error) {
	if err := s.lost(); err != nil {
		return 0, false, err
	}
	ctx, cancel := s.op()
	defer cancel()
	err = s.pool.QueryRow(ctx, `UPDATE approval_requests SET data = jsonb_set(data, '{calls}', to_jsonb((data->>'calls')::int + 1)), rev = rev + 1, updated = clock_timestamp()
		WHERE id = $1 AND status = 'pending' RETURNING rev`, id).Scan(&rev)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, dbError(err)
	}
	return rev, true, nil
}

// lost is an error while the notification connection is lost: a call
// that needs a request is refused at once then, not after the operation's
// timeout against a database that does not answer (the gate's lock is held
// meanwhile, and every decision waits for it).
func (s *PostgresStore) lost() error {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		return connectionLost{dbError(errors.New("the connection is lost; the gateway reconnects by itself"))}
	}
	return nil
}

// connectionLost is lost's error, and is gateway.ErrUnavailable: the agent
// whose call it refuses is told it may repeat the call later.
type connectionLost struct{ error }

func (connectionLost) Is(target error) bool { return target == gateway.ErrUnavailable }

func (e connectionLost) Unwrap() error { return e.error }

// watch tells apply of every request another replica changes, until the
// store closes: by notification, and by a resync every s.resync. A lost
// connection is logged, retried, and its return logged.
func (s *PostgresStore) watch(apply func(*Request)) {
	s.mu.Lock()
	s.apply = apply
	s.mu.Unlock()
	if !s.noListn {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.listenLoop()
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.resync)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				s.resyncNow()
				ctx, cancel := s.op()
				s.seen(ctx)
				cancel()
			}
		}
	}()
}

// resyncNow reads the requests changed since the last resync (with a
// margin for changes that committed late) and applies them.
func (s *PostgresStore) resyncNow() {
	ctx, cancel := s.op()
	defer cancel()
	s.mu.Lock()
	since, apply := s.since, s.apply
	s.mu.Unlock()
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return
	}
	reqs, err := s.query(ctx, `SELECT data, rev, fold FROM approval_requests WHERE updated >= $1`, since)
	if err != nil {
		return
	}
	for _, r := range reqs {
		apply(r)
	}
	s.mu.Lock()
	s.since = now.Add(-time.Minute)
	s.mu.Unlock()
}

func (s *PostgresStore) listenLoop() {
	backoff := 100 * time.Millisecond
	for s.ctx.Err() == nil {
		err := s.listenOnce()
		if s.ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		wasDown := s.down
		s.down = true
		s.mu.Unlock()
		if !wasDown {
			// The pool's connections went with it: new ones are made
			// as operations need them.
			s.pool.Reset()
			s.logger.Error("lost the connection to the state database: decisions made on other replicas reach this one when it is back; holds are refused meanwhile", "replica", s.replica, "error", redact(err).Error())
		}
		t := time.NewTimer(backoff)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// listenOnce listens until the connection fails.
func (s *PostgresStore) listenOnce() error {
	ctx, cancel := s.op()
	conn, err := pgx.ConnectConfig(ctx, s.listen)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(s.ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	s.mu.Lock()
	wasDown := s.down
	s.down = false
	s.mu.Unlock()
	if wasDown {
		s.pool.Reset()
		s.logger.Info("reconnected to the state database", "replica", s.replica)
		// What changed while the connection was lost.
		s.resyncNow()
	}
	for {
		n, err := conn.WaitForNotification(s.ctx)
		if err != nil {
			return err
		}
		ctx, cancel := s.op()
		r, err := s.get(ctx, n.Payload)
		cancel()
		if err != nil {
			continue // deleted, or unreadable: the resync says so
		}
		s.mu.Lock()
		apply := s.apply
		s.mu.Unlock()
		apply(r)
	}
}
