package approval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// AcceptTable checks t against the last table any replica accepted (the
// shared rollback high-water mark) and, unless readOnly, records it: a
// table older than one a replica accepted is refused (decide.ErrRollback),
// as is other content at the same serial, or the same content re-signed
// with an expiry that does not extend the accepted one. The gateway calls
// it from the table loader's accept, after its own checks, so a table it
// refuses records nothing.
func (s *PostgresStore) AcceptTable(ctx context.Context, t *decide.Table, readOnly bool) error {
	src := t.Source()
	content := table.ContentDigest(src)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var refusal error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if !readOnly {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, acceptLock); err != nil {
				return err
			}
		}
		var last struct {
			serial                       int64
			digest, content, expires, by string
			at                           time.Time
		}
		err := tx.QueryRow(ctx, `SELECT serial, digest, content, expires, by, at FROM accepted_table WHERE id = 1 FOR UPDATE`).
			Scan(&last.serial, &last.digest, &last.content, &last.expires, &last.by, &last.at)
		found := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if s.acceptRead != nil {
			s.acceptRead()
		}
		if found {
			where := fmt.Sprintf("accepted by replica %s at %s (the state database's accepted_table)", last.by, last.at.UTC().Format(time.RFC3339))
			switch {
			case int64(src.Serial) < last.serial:
				refusal = fmt.Errorf("%w: table serial %d is older than serial %d, %s: refusing a rollback to an older policy; deploy a table built from the current commit%s", decide.ErrRollback, src.Serial, last.serial, where, decide.WorkTreeHint(src.Serial, ""))
			case int64(src.Serial) == last.serial && src.Digest != last.digest && content != last.content:
				refusal = fmt.Errorf("%w: table serial %d is the serial %s, but its content differs: a changed table must carry a newer serial%s", decide.ErrRollback, src.Serial, where, decide.WorkTreeHint(src.Serial, ""))
			case int64(src.Serial) == last.serial && src.Digest != last.digest && !table.ExtendsExpiry(src.Expires, last.expires):
				refusal = fmt.Errorf("%w: table serial %d, %s, is re-signed with %s, which does not extend the accepted one's (%s): a renewal must extend it", decide.ErrRollback, src.Serial, where, decide.ExpiryText(src.Expires), decide.ExpiryText(last.expires))
			}
			if refusal != nil || readOnly || last.serial == int64(src.Serial) && last.digest == src.Digest {
				return nil
			}
		}
		if readOnly {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO accepted_table (id, serial, digest, content, expires, by, at) VALUES (1, $1, $2, $3, $4, $5, clock_timestamp())
			ON CONFLICT (id) DO UPDATE SET serial = $1, digest = $2, content = $3, expires = $4, by = $5, at = clock_timestamp()`,
			int64(src.Serial), src.Digest, content, src.Expires, s.replica)
		return err
	})
	if err != nil {
		return fmt.Errorf("check the table against the state database's last accepted table: %v", redact(err))
	}
	return refusal
}

// Serving records that this replica now serves t, for 'policyc gateway
// status', and logs it.
func (s *PostgresStore) Serving(ctx context.Context, t *decide.Table) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	host, _ := os.Hostname()
	s.warnNameTaken(ctx, host)
	_, err := s.pool.Exec(ctx, `INSERT INTO replicas (name, host, pid, started, serial, digest, loaded, seen) VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp(), clock_timestamp())
		ON CONFLICT (name) DO UPDATE SET host = $2, pid = $3, started = $4, serial = $5, digest = $6, loaded = clock_timestamp(), seen = clock_timestamp()`,
		s.replica, host, os.Getpid(), s.started, int64(t.Serial()), t.Digest())
	if err != nil {
		s.logger.Error("recording the serving table in the state database failed; 'policyc gateway status' shows this replica's previous one", "replica", s.replica, "table_serial", t.Serial(), "error", redact(err).Error())
		return dbError(err)
	}
	s.logger.Info("replica serving table", "replica", s.replica, "table_serial", t.Serial(), "table_digest", t.Digest())
	// Replicas gone for a week are forgotten.
	s.pool.Exec(ctx, `DELETE FROM replicas WHERE seen < clock_timestamp() - interval '7 days'`)
	return nil
}

// warnNameTaken logs a warning when another live replica (heard of within
// the last 30 seconds, on another host or with another pid) holds this
// replica's name: the replicas table keeps one row a name, so the two would
// overwrite each other's, and gateway status would show one of them.
func (s *PostgresStore) warnNameTaken(ctx context.Context, host string) {
	var otherHost string
	var otherPID int
	err := s.pool.QueryRow(ctx, `SELECT host, pid FROM replicas WHERE name = $1 AND (host <> $2 OR pid <> $3) AND seen > clock_timestamp() - interval '30 seconds'`,
		s.replica, host, os.Getpid()).Scan(&otherHost, &otherPID)
	if err != nil {
		return // none, or the insert that follows reports the database's error
	}
	s.logger.Warn("another live replica has this replica's name: give each its own state.postgres.replica, or 'policyc gateway status' shows only one of them",
		"replica", s.replica, "other_host", otherHost, "other_pid", otherPID)
}

// seen marks this replica alive in the replicas table, once it serves.
func (s *PostgresStore) seen(ctx context.Context) {
	s.pool.Exec(ctx, `UPDATE replicas SET seen = clock_timestamp() WHERE name = $1 AND pid = $2`, s.replica, os.Getpid())
}

// ReplicaStatus is one replica as the replicas table shows it.
type ReplicaStatus struct {
	Name    string    `json:"name"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Serial  uint64    `json:"table_serial"`
	Digest  string    `json:"table_digest"`
	// Loaded is when it started serving the table; Seen when it was last
	// heard of (it says so at every resync).
	Loaded time.Time `json:"loaded"`
	Seen   time.Time `json:"seen"`
}

// AcceptedTable is the last table any replica accepted.
type AcceptedTable struct {
	Serial uint64    `json:"serial"`
	Digest string    `json:"digest"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// Status returns the replicas, by name, the last accepted table (nil
// before the first), and the database's clock.
func (s *PostgresStore) Status(ctx context.Context) ([]ReplicaStatus, *AcceptedTable, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return nil, nil, now, dbError(err)
	}
	rows, err := s.pool.Query(ctx, `SELECT name, host, pid, started, serial, digest, loaded, seen FROM replicas ORDER BY name`)
	if err != nil {
		return nil, nil, now, dbError(err)
	}
	var out []ReplicaStatus
	for rows.Next() {
		var r ReplicaStatus
		var serial int64
		if err := rows.Scan(&r.Name, &r.Host, &r.PID, &r.Started, &serial, &r.Digest, &r.Loaded, &r.Seen); err != nil {
			rows.Close()
			return nil, nil, now, dbError(err)
		}
		r.Serial = uint64(serial)
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, now, dbError(err)
	}
	var a AcceptedTable
	var serial int64
	err = s.pool.QueryRow(ctx, `SELECT serial, digest, by, at FROM accepted_table WHERE id = 1`).Scan(&serial, &a.Digest, &a.By, &a.At)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return out, nil, now, nil
	case err != nil:
		return nil, nil, now, dbError(err)
	}
	a.Serial = uint64(serial)
	return out, &a, now, nil
}
