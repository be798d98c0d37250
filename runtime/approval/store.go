package approval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/policyc/policyc/internal/fileio"
)

// Files of the store, in the gateway's state directory.
const (
	// StateFile holds the requests: one JSON line per change, each the
	// whole request as it stands after the change; the last line of an id
	// wins. It is compacted (rewritten atomically) when the gateway starts
	// and as the gate drops requests past their retention.
	StateFile = "approvals.jsonl"
	// AuditFile is the audit log: one JSON line per event (a request made,
	// notified, decided, used, expired, revoked), appended and never
	// rewritten by the gateway.
	AuditFile = "approvals-audit.jsonl"
	// lockFile keeps two gateways from sharing one store.
	lockFile = "approvals.lock"
)

// Event is one line of the audit log: who did what to which request, when
// and from where. It never holds arguments, previews or fingerprints.
type Event struct {
	Time time.Time `json:"time"`
	// Event is requested, notified, notify_failed, approved, denied,
	// expired, ran, not_run, revoked.
	Event     string `json:"event"`
	ID        string `json:"id"`
	Kind      Kind   `json:"kind"`
	Principal string `json:"principal"`
	Server    string `json:"server"`
	Tool      string `json:"tool,omitempty"`
	URI       string `json:"uri,omitempty"`
	// By and From are the approver and where the decision came from, for
	// decisions and revocations.
	By   string `json:"by,omitempty"`
	From string `json:"from,omitempty"`
	// For and Until are an approval's duration and end.
	For    string    `json:"for,omitempty"`
	Until  time.Time `json:"until,omitzero"`
	Detail string    `json:"detail,omitempty"`
}

// Store is the durable side of the gate: where its requests and audit log
// are kept. Every change is recorded before it takes effect: a decision the
// store could not record is not taken. The gate's own file store (in
// Config.StateDir) is the default; a PostgresStore (Config.Store) lets
// several gateways share one state.
type Store interface {
	// put records r as it now stands, and ev (when not nil) in the audit
	// log. A shared store records it only if the stored request is still
	// at r.rev (a *staleError otherwise) and sets r.rev to its new revision.
	put(r *Request, ev *Event) error
	// logEvent appends ev to the audit log alone.
	logEvent(ev *Event) error
	// failed returns the error that keeps the store from recording, if any.
	failed() error
	// prune drops the requests finished more than retention ago. keep is
	// every request the gate keeps, as it stands.
	prune(keep []*Request, retention time.Duration) error
	close() error
}

// staleError is a change a shared store refused because another gateway
// changed the request first: cur is the request as stored now (nil when it
// is gone).
type staleError struct{ cur *Request }

func (e *staleError) Error() string {
	return "the request was changed by another gateway sharing the state"
}

// fileStore is the gate's store in files. Every change is written and
// synced to disk before it takes effect. After a failed write the store
// refuses every later change (the gateway must be restarted), so the file
// never holds a torn line in its middle.
type fileStore struct {
	dir   string
	mu    sync.Mutex
	state *os.File
	audit *os.File
	lock  *os.File
	buf   []byte
	// lines counts the lines of the state file.
	lines int
	// logger reports an audit line that could not be written.
	logger *slog.Logger
	// broken is the first write error.
	broken error
	// closed is set by close: nothing is reopened after it.
	closed bool
}

// openStore locks the store in dir and reads its requests. A last line cut
// short (the gateway stopped while writing it) is dropped, and reported in
// torn; any other unreadable line is an error naming the file and line.
func openStore(dir string, logger *slog.Logger) (s *fileStore, reqs map[string]*Request, torn string, err error) {
	if dir == "" {
		return nil, nil, "", errors.New("no state directory: approvals must survive a restart, so the gate needs the gateway's state_dir")
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, "", fmt.Errorf("state directory: %w", err)
	}
	if !st.IsDir() {
		return nil, nil, "", fmt.Errorf("state directory %s is not a directory", dir)
	}
	s = &fileStore{dir: dir, logger: logger}
	lock, err := lockDir(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, nil, "", err
	}
	s.lock = lock
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	reqs, torn, err = readState(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, nil, "", err
	}
	if s.audit, err = os.OpenFile(filepath.Join(dir, AuditFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
		return nil, nil, "", fmt.Errorf("open the audit log: %w", err)
	}
	return s, reqs, torn, nil
}

func readState(path string) (map[string]*Request, string, error) {
	reqs := map[string]*Request{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return reqs, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("open the approval store: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	torn := ""
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, "", fmt.Errorf("read %s: %w", path, err)
		}
		last := err == io.EOF
		if len(bytes.TrimSpace(line)) > 0 {
			var q Request
			derr := json.Unmarshal(line, &q)
			if derr == nil {
				derr = q.check()
			}
			switch {
			case derr == nil && !last:
				reqs[q.ID] = &q
			case last:
				// Written without its newline: the gateway stopped in
				// the middle of this write, so the change never took
				// effect.
				torn = fmt.Sprintf("%s:%d: dropped a line cut short when the gateway stopped (%d bytes)", path, n, len(line))
			default:
				return nil, "", fmt.Errorf("%s:%d: %v; the approval store is damaged: restore it from a backup, or move it away to start with no requests (every pending request and remembered approval is then gone)", path, n, derr)
			}
		}
		if last {
			return reqs, torn, nil
		}
	}
}

// check reports why a stored request cannot be one the gate wrote.
func (r *Request) check() error {
	switch {
	case r.ID == "":
		return errors.New("a request without an id")
	case r.Kind != KindTool && r.Kind != KindConsent:
		return fmt.Errorf("request %s: unknown kind %q", r.ID, r.Kind)
	case r.Status != Pending && r.Status != Approved && r.Status != Denied && r.Status != Expired:
		return fmt.Errorf("request %s: unknown status %q", r.ID, r.Status)
	case (r.Status == Approved || r.Status == Denied) && r.Decision == nil:
		return fmt.Errorf("request %s is %s without a decision", r.ID, r.Status)
	}
	return nil
}

// compact rewrites the state file with reqs only, atomically, and opens it
// for appending.
func (s *fileStore) compact(reqs []*Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compactLocked(reqs)
}

func (s *fileStore) compactLocked(reqs []*Request) error {
	sort.Slice(reqs, func(i, j int) bool {
		if !reqs[i].Created.Equal(reqs[j].Created) {
			return reqs[i].Created.Before(reqs[j].Created)
		}
		return reqs[i].ID < reqs[j].ID
	})
	var b []byte
	for _, r := range reqs {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	path := filepath.Join(s.dir, StateFile)
	if err := fileio.WriteAtomic(path, b, 0o600); err != nil {
		return fmt.Errorf("compact the approval store: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		// The file in place is the new one: appending to the old would
		// record changes where no restart reads them.
		s.broken = fmt.Errorf("open the approval store: %w", err)
		return s.broken
	}
	if s.state != nil {
		s.state.Close()
	}
	s.state, s.lines = f, len(reqs)
	return nil
}

// prune rewrites the state file with keep once it holds twice as many
// lines as keep has requests, not on every look: the lines of requests let
// go (which a restart drops too) and of older changes of those kept wait
// until then, so the file is rewritten as often as it doubles, and the
// gate, whose lock is held meanwhile, pauses that rarely. A store that
// failed earlier is left as it is: it records nothing until restart.
func (s *fileStore) prune(keep []*Request, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil || s.lines < 2*len(keep) || s.lines == 0 {
		return nil
	}
	return s.compactLocked(keep)
}

// put records r as it now stands, and ev (when not nil) in the audit log.
// The request line is synced first: once put returns nil the change
// survives a crash.
func (s *fileStore) put(r *Request, ev *Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return fmt.Errorf("the approval store failed earlier, so no change is recorded until the gateway restarts: %w", s.broken)
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	s.buf = append(append(s.buf[:0], line...), '\n')
	if err := s.write(s.state, StateFile); err != nil {
		return err
	}
	s.lines++
	if ev != nil {
		if err := s.event(ev); err != nil && s.logger != nil {
			// The change is recorded and stands; the audit line is
			// missing, and the store refuses every change after it.
			s.logger.Error("audit log write failed; the change stands, and no further change is recorded until the gateway restarts", "id", r.ID, "event", ev.Event, "error", err.Error())
		}
	}
	return nil
}

// event appends ev to the audit log alone.
func (s *fileStore) logEvent(ev *Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return s.broken
	}
	return s.event(ev)
}

func (s *fileStore) event(ev *Event) error {
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	s.buf = append(append(s.buf[:0], line...), '\n')
	return s.write(s.audit, AuditFile)
}

func (s *fileStore) write(f *os.File, name string) error {
	_, err := f.Write(s.buf)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		s.broken = fmt.Errorf("write %s: %w", filepath.Join(s.dir, name), err)
		return s.broken
	}
	return nil
}

// reopenAudit opens the audit log by its path again, for rotation: the
// file was renamed (or removed), and the lines from now on go to a new
// one. When it cannot be opened the lines go on to the file open before.
// A store that is closed (the gateway stopping) reopens nothing.
func (s *fileStore) reopenAudit() (string, error) {
	path := filepath.Join(s.dir, AuditFile)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return path, errors.New("the gateway is stopping")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return path, fmt.Errorf("reopen the audit log: %w; its lines still go to the file open before", err)
	}
	// Every line written to the old file was synced: closing it loses
	// nothing, whatever it returns.
	s.audit.Close()
	s.audit = f
	return path, nil
}

// failed returns the store's write error, if any.
func (s *fileStore) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

func (s *fileStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, f := range []*os.File{s.state, s.audit, s.lock} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}
