package approval

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var testSecret = []byte("test-secret-0123456789abcdef")

// receiver is a webhook receiver that verifies every delivery with
// VerifyWebhook, as a real one would, and fails the first failFirst.
type receiver struct {
	secret    []byte
	failFirst int

	mu       sync.Mutex
	attempts int
	accepted []WebhookEvent
	bodies   []string
	refused  []error
	headers  []http.Header
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.attempts++
	rc.headers = append(rc.headers, r.Header.Clone())
	if rc.attempts <= rc.failFirst {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	if err := VerifyWebhook(rc.secret, r.Header.Get(SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
		rc.refused = append(rc.refused, err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ev WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.accepted = append(rc.accepted, ev)
	rc.bodies = append(rc.bodies, string(body))
}

func webhookGate(t *testing.T, secret []byte) (*Gate, Channel, *receiver) {
	rc := &receiver{secret: testSecret}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	g := openGate(t, "", func(c *Config) {
		c.Webhook = WebhookOptions{Secret: secret, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Attempts: 4}
	})
	return g, Channel{Name: "hook", Kind: ChannelWebhook, URL: srv.URL}, rc
}

func waitDelivery(t *testing.T, g *Gate, id string) *Delivery {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ch := g.Changed()
		if r, _ := g.Get(id); r.Delivery != nil && r.Delivery.State != "sending" {
			return r.Delivery
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
			t.Fatal("the delivery did not finish")
		}
	}
}

func TestWebhookDelivery(t *testing.T) {
	g, hook, rc := webhookGate(t, testSecret)
	rc.failFirst = 2 // retried with backoff
	c := call("alice", "merge_pull_request", `{"number":7,"token":"SECRET-VALUE-`+strings.Repeat("x", 100)+`"}`)
	c.Channel = hook
	ch := hold(context.Background(), g, c)
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	d := waitDelivery(t, g, r.ID)
	if d.State != "delivered" || d.Attempts != 3 {
		t.Fatalf("delivery %+v, want delivered on the 3rd attempt", d)
	}
	rc.mu.Lock()
	if len(rc.accepted) != 1 || len(rc.refused) != 0 {
		t.Fatalf("accepted %d, refused %v", len(rc.accepted), rc.refused)
	}
	ev := rc.accepted[0]
	raw := rc.bodies[0]
	h := rc.headers[2]
	rc.mu.Unlock()
	if ev.Event != "approval.requested" || ev.Request.ID != r.ID || ev.URL != "http://approvals.test/approvals/"+r.ID || ev.Request.Preview == nil {
		t.Fatalf("event %+v", ev)
	}
	if h.Get(DeliveryHeader) != r.ID+".3" || h.Get(EventHeader) != "approval.requested" {
		t.Fatalf("headers %v", h)
	}
	if strings.Contains(raw, "fingerprint") || strings.Contains(raw, "sha256:") || ev.Request.Preview == nil {
		t.Fatalf("the delivery carries a fingerprint, or no preview: %s", raw)
	}
	b, _ := json.Marshal(ev)
	if strings.Contains(string(b), strings.Repeat("x", 81)) {
		t.Fatal("the delivery carries more of the arguments than the preview")
	}
	// Delivered is not decided: the call still waits for a human.
	still(t, g, r.ID, ch)
	mustDecide(t, g, r.ID, VerdictApprove, ForOnce)
	recv(t, ch)
}

// A delivery that fails for good leaves the request pending, never
// approved; it can still be decided, or it expires.
func TestWebhookFailureNotApproval(t *testing.T) {
	g, hook, rc := webhookGate(t, testSecret)
	rc.failFirst = 1000
	c := call("alice", "merge_pull_request", `{}`)
	c.Channel = hook
	// Long enough for every attempt on a loaded machine: the request must
	// still be pending once the delivery has failed. When the client gives
	// up, its call is answered pending and the request goes on, undecided.
	c.Timeout = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := hold(ctx, g, c)
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	d := waitDelivery(t, g, r.ID)
	if d.State != "failed" || d.Attempts != 4 || !strings.Contains(d.Error, "503") {
		t.Fatalf("delivery %+v", d)
	}
	if got, _ := g.Get(r.ID); got.Status != Pending {
		t.Fatalf("after a failed delivery the request is %s", got.Status)
	}
	cancel()
	h := recv(t, ch)
	if h.o.Answer != AnswerPending {
		t.Fatalf("a call whose channel failed got %v, want it answered pending", h.o.Answer)
	}
	if got, _ := g.Get(r.ID); got.Status != Pending || got.Decision != nil {
		t.Fatalf("after the call left the request is %s, decision %+v", got.Status, got.Decision)
	}
	if !strings.Contains(readFile(t, g.cfg.StateDir, AuditFile), `"event":"notify_failed"`) {
		t.Fatal("the failed delivery is not in the audit log")
	}
}

// A receiver using VerifyWebhook refuses deliveries signed with another
// secret.
func TestForgedWebhookRefused(t *testing.T) {
	g, hook, rc := webhookGate(t, []byte("a-different-secret-0123456789"))
	c := call("alice", "merge_pull_request", `{}`)
	c.Channel = hook
	hold(context.Background(), g, c)
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	if d := waitDelivery(t, g, r.ID); d.State != "failed" {
		t.Fatalf("forged delivery: %+v", d)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.accepted) != 0 || len(rc.refused) != 4 {
		t.Fatalf("accepted %d forged deliveries, refused %d", len(rc.accepted), len(rc.refused))
	}
	for _, err := range rc.refused {
		if !errors.Is(err, ErrBadSignature) {
			t.Fatalf("refused with %v", err)
		}
	}
}

func TestVerifyWebhook(t *testing.T) {
	body := []byte(`{"event":"approval.requested"}`)
	now := time.Unix(1_800_000_000, 0)
	sig := SignWebhook(testSecret, body, now)
	if err := VerifyWebhook(testSecret, sig, body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	other := SignWebhook([]byte("old-secret-0123456789abcdef"), body, now)
	_, v1, _ := strings.Cut(other, ",")
	if err := VerifyWebhook(testSecret, sig+","+v1, body, now, time.Minute); err != nil {
		t.Fatalf("two signatures, one good: %v", err)
	}
	for _, tc := range []struct {
		name   string
		header string
		body   []byte
		at     time.Time
		want   error
	}{
		{"tampered body", sig, []byte(`{"event":"approval.requested "}`), now, ErrBadSignature},
		{"other secret", other, body, now, ErrBadSignature},
		{"replayed later", sig, body, now.Add(10 * time.Minute), ErrStale},
		{"from the future", sig, body, now.Add(-10 * time.Minute), ErrStale},
		{"no header", "", body, now, ErrNoSignature},
		{"no v1", "t=1800000000", body, now, ErrNoSignature},
		{"bad hex", "t=1800000000,v1=zz", body, now, ErrNoSignature},
		{"timestamp changed", strings.Replace(sig, "t=1800000000", "t=1800000001", 1), body, now, ErrBadSignature},
	} {
		if err := VerifyWebhook(testSecret, tc.header, tc.body, tc.at, 5*time.Minute); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := VerifyWebhook(nil, sig, body, now, time.Minute); err == nil {
		t.Fatal("verified without a secret")
	}
}

// Whatever header and body arrive, a delivery is accepted only when the
// header carries the true MAC of that body and the timestamp it names.
func FuzzVerifyWebhook(f *testing.F) {
	body := []byte(`{"a":1}`)
	now := time.Unix(1_800_000_000, 0)
	f.Add(SignWebhook(testSecret, body, now), body)
	f.Add("t=1,v1=00", []byte{})
	f.Add("v1=ab, t=1800000000", body)
	f.Fuzz(func(t *testing.T, header string, b []byte) {
		if VerifyWebhook(testSecret, header, b, now, time.Minute) != nil {
			return
		}
		ts := ""
		for _, part := range strings.Split(header, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(part), "t="); ok {
				ts = v
			}
		}
		mac := hex.EncodeToString(webhookMAC(testSecret, ts, b))
		if !strings.Contains(strings.ToLower(header), "v1="+mac) {
			t.Fatalf("accepted %q for %q without its MAC", header, b)
		}
	})
}

// holdLog is a log handler that holds the goroutine logging msg until
// release is closed; reached is closed when it does.
type holdLog struct {
	slog.Handler
	msg              string
	reached, release chan struct{}
}

func (h holdLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		close(h.reached)
		<-h.release
	}
	return nil
}

// handlerTransport delivers a client's requests to a handler in the same
// process, with no socket: a test using it can run in a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// A Close made while another is under way returns once that one has
// finished: the command closes the gate when it is told to stop and again
// as it returns, and must not exit before a delivery that was stopping
// has recorded how it ended. In a synctest bubble, the webhook served in
// process: once synctest.Wait returns, the second Close is blocked if it
// is ever going to be, so "it has not returned" is exact.
func TestCloseWaitsForCloseUnderWay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{secret: testSecret, failFirst: 1000}
		log := holdLog{Handler: slog.NewTextHandler(io.Discard, nil), msg: "webhook delivery failed", reached: make(chan struct{}), release: make(chan struct{})}
		g := openGate(t, "", func(c *Config) {
			c.Webhook = WebhookOptions{Secret: testSecret, MinBackoff: time.Minute, MaxBackoff: time.Minute, Attempts: 4,
				Client: &http.Client{Transport: handlerTransport{rc}}}
			c.Logger = slog.New(log)
		})
		release := sync.OnceFunc(func() { close(log.release) })
		t.Cleanup(release) // before the gate's Close, should the test end early
		c := call("alice", "merge_pull_request", `{}`)
		c.Channel = Channel{Name: "hook", Kind: ChannelWebhook, URL: "http://hook.test/"}
		held := hold(context.Background(), g, c)
		// The first attempt failed; the delivery is held as it logs that.
		<-log.reached
		first := make(chan error, 1)
		go func() { first <- g.Close() }()
		// The first Close expires the request (the held call is answered)
		// and then waits for the delivery to stop.
		if h := recv(t, held); h.o.Answer != AnswerTimedOut {
			t.Fatalf("the held call got %v, want a timeout", h.o.Answer)
		}
		second := make(chan error, 1)
		go func() { second <- g.Close() }()
		synctest.Wait()
		select {
		case <-second:
			t.Fatal("a second Close returned while the first still waited for a delivery to stop")
		default:
		}
		release()
		<-second
		// Returned: the delivery has recorded its end.
		if audit := readFile(t, g.cfg.StateDir, AuditFile); !strings.Contains(audit, `"event":"notify_failed"`) || !strings.Contains(audit, "the gateway stopped") {
			t.Fatalf("the stopped delivery is not in the audit log:\n%s", audit)
		}
		if err := <-first; err != nil {
			t.Fatal(err)
		}
	})
}

// What a receiver posts into a chat cannot carry a terminal's escapes or a
// BiDi override: the text fields of a delivery are neutralised, so the
// client's name arrives as visible escapes, and the rest as it was.
func TestWebhookTextNeutralised(t *testing.T) {
	g, hook, rc := webhookGate(t, testSecret)
	c := call("alice", "merge_pull_request", `{"title":"ok\u202e"}`)
	c.Client = "agent\x1b[2K\r\u202elive 1.0\u0085"
	c.Channel = hook
	ch := hold(context.Background(), g, c)
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	if d := waitDelivery(t, g, r.ID); d.State != "delivered" {
		t.Fatalf("delivery %+v", d)
	}
	rc.mu.Lock()
	raw, ev := rc.bodies[0], rc.accepted[0]
	rc.mu.Unlock()
	if want := `"client":"agent\\x1b[2K\\x0d\\u202elive 1.0\\u0085"`; !strings.Contains(raw, want) {
		t.Fatalf("the delivery's client is not %s:\n%s", want, raw)
	}
	if ev.Request.Client != `agent\x1b[2K\x0d\u202elive 1.0\u0085` || ev.Request.Tool != "merge_pull_request" || ev.Request.Principal != "alice" {
		t.Fatalf("the receiver reads client %q, tool %q, principal %q", ev.Request.Client, ev.Request.Tool, ev.Request.Principal)
	}
	if f := ev.Request.Preview.Fields[0]; f.Value != `"ok\u202e"` {
		t.Fatalf("preview %+v", f)
	}
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\u0085", `\u001b`, `\r`} {
		if strings.Contains(raw, bad) {
			t.Fatalf("the delivery holds %q:\n%s", bad, raw)
		}
	}
	// The gate keeps the name as the client gave it.
	if got, _ := g.Get(r.ID); got.Client != c.Client {
		t.Fatalf("stored client %q", got.Client)
	}
	mustDecide(t, g, r.ID, VerdictDeny, "")
	recv(t, ch)
}
