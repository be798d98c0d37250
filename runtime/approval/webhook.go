package approval

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/policyc/policyc/internal/termsafe"
	"github.com/policyc/policyc/runtime/gateway"
)

// Webhook deliveries: a POST of a JSON WebhookEvent with these headers.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>": the
	// HMAC, keyed with the shared secret, of the decimal timestamp, a dot
	// and the request body. VerifyWebhook checks it.
	SignatureHeader = "Policyc-Signature"
	// EventHeader names the event ("approval.requested" or
	// "consent.requested"); DeliveryHeader identifies the attempt
	// ("<request id>.<attempt>"), the same request id on every retry.
	EventHeader    = "Policyc-Event"
	DeliveryHeader = "Policyc-Delivery"
)

// minSecret is the shortest webhook secret accepted, in bytes.
const minSecret = 16

// WebhookOptions configure deliveries to webhook channels.
type WebhookOptions struct {
	// Secret keys the HMAC signature of every delivery; the receiver
	// holds the same secret. At least 16 bytes.
	Secret []byte
	// Client sends the deliveries; nil means a client with Timeout. It
	// must not follow redirects (the gate's default does not).
	Client *http.Client
	// Attempts is how many times a delivery is tried. Default 6.
	Attempts int
	// MinBackoff and MaxBackoff bound the wait between attempts, which
	// doubles from MinBackoff. Defaults 500ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one attempt. Default 10s.
	Timeout time.Duration
}

func (o *WebhookOptions) check() error {
	if len(o.Secret) > 0 && len(o.Secret) < minSecret {
		return fmt.Errorf("the webhook secret is %d bytes; use at least %d (for example: openssl rand -hex 32)", len(o.Secret), minSecret)
	}
	if o.Attempts <= 0 {
		o.Attempts = 6
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Client == nil {
		o.Client = &http.Client{
			Timeout:       o.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return nil
}

func checkWebhookURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("webhook URL %q is not an http or https URL", s)
	}
	return nil
}

// WebhookEvent is the body of a delivery.
type WebhookEvent struct {
	// Event is "approval.requested" or "consent.requested".
	Event string `json:"event"`
	// Request is the request as the admin API shows it (a preview of the
	// arguments, never the arguments), with every text field neutralised
	// as Neutral does: a receiver that posts the client's name or the
	// tool's into a chat shows a control character or a BiDi override as
	// an escape (\x1b, \u202e), never as itself. Text without such
	// characters is as the admin API shows it.
	Request Request `json:"request"`
	// URL links to the request on the approvals page, when the gateway
	// knows its address.
	URL string `json:"url,omitempty"`
}

// SignWebhook returns the SignatureHeader value for body sent at t.
func SignWebhook(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(webhookMAC(secret, ts, body))
}

func webhookMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Errors of VerifyWebhook.
var (
	ErrNoSignature  = errors.New("webhook: no signature")
	ErrBadSignature = errors.New("webhook: signature does not match")
	ErrStale        = errors.New("webhook: timestamp outside the tolerance")
)

// VerifyWebhook is for receivers: it checks the SignatureHeader value of a
// delivery against its body and the shared secret, and that the signed
// timestamp is within tolerance of now (a captured delivery cannot be
// replayed later). Several v1 values may be given (while secrets rotate);
// one must match. Compare before parsing the body.
func VerifyWebhook(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secret) == 0 {
		return errors.New("webhook: no secret to verify with")
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" || len(sigs) == 0 {
		return fmt.Errorf("%w: the %s header must be t=<unix seconds>,v1=<hex HMAC-SHA256>", ErrNoSignature, SignatureHeader)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not a number", ErrNoSignature, ts)
	}
	want := webhookMAC(secret, ts, body)
	ok := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			ok = true
		}
	}
	if !ok {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: signed at %s, %s from now (tolerance %s)", ErrStale, time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), tolerance)
	}
	return nil
}

// deliver notifies a webhook channel of e's request, retrying with backoff
// while the request is pending. The outcome is recorded on the request and
// in the audit log. A failed delivery leaves the request pending: it can
// still be decided on the approvals page or through the admin API, and it
// expires if no one does.
func (g *Gate) deliver(e *entry, ch Channel) {
	o := g.cfg.Webhook
	g.mu.Lock()
	r := e.r.clone()
	g.mu.Unlock()
	event := "approval.requested"
	if r.Kind == KindConsent {
		event = "consent.requested"
	}
	r.Delivery = nil
	body, err := json.Marshal(WebhookEvent{Event: event, Request: Neutral(r), URL: g.Link(r.ID)})
	if err != nil {
		g.recordDelivery(e, Delivery{State: "failed", Error: err.Error()})
		return
	}
	backoff := o.MinBackoff
	var last error
	attempt := 1
	for ; ; attempt++ {
		g.mu.Lock()
		pending := e.r.Status == Pending
		g.mu.Unlock()
		if !pending {
			return // decided or expired meanwhile: nobody needs asking
		}
		if last = g.post(ch.URL, body, event, r.ID, attempt); last == nil {
			g.recordDelivery(e, Delivery{State: "delivered", Attempts: attempt, At: g.now()})
			return
		}
		g.logger.Warn("webhook delivery failed", "id", r.ID, "channel", ch.Name, "attempt", attempt, "of", o.Attempts, "error", last.Error())
		if attempt == o.Attempts {
			break
		}
		select {
		case <-time.After(backoff):
		case <-g.ctx.Done():
			g.recordDelivery(e, Delivery{State: "failed", Attempts: attempt, At: g.now(), Error: "the gateway stopped: " + last.Error()})
			return
		}
		backoff = min(2*backoff, o.MaxBackoff)
	}
	g.logger.Error("webhook delivery failed for good; the request stays pending: decide it on the approvals page or with 'policyc approvals'", "id", r.ID, "channel", ch.Name, "attempts", attempt, "error", last.Error())
	g.recordDelivery(e, Delivery{State: "failed", Attempts: attempt, At: g.now(), Error: last.Error()})
}

func (g *Gate) post(target string, body []byte, event, id string, attempt int) error {
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.Webhook.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "policyc-gateway")
	req.Header.Set(EventHeader, event)
	req.Header.Set(DeliveryHeader, id+"."+strconv.Itoa(attempt))
	req.Header.Set(SignatureHeader, SignWebhook(g.cfg.Webhook.Secret, body, g.now()))
	resp, err := g.cfg.Webhook.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}

func (g *Gate) recordDelivery(e *entry, d Delivery) {
	g.mu.Lock()
	defer g.mu.Unlock()
	what, detail := "notified", ""
	if d.State != "delivered" {
		what, detail = "notify_failed", d.Error
	}
	for try := 0; ; try++ {
		r := e.r.clone()
		r.Delivery = &d
		if err := g.storeLocked(e, &r, r.event(d.At, what, Approver{}, detail)); err != nil {
			if isStale(err) && try < maxTries {
				continue // a call joined on another replica meanwhile
			}
			g.logger.Error("recording a delivery failed", "id", r.ID, "error", err.Error())
			return
		}
		e.r = r
		break
	}
	g.changedLocked()
}

// EventDrift is the event of a drift delivery: an upstream's tool, prompt
// or resource is no longer the definition the table pins.
const EventDrift = "definition.drift"

// DriftEvent is the body of a drift delivery. Its text fields come from an
// upstream and are neutralised as Neutral does.
type DriftEvent struct {
	// Event is EventDrift.
	Event string        `json:"event"`
	Drift gateway.Drift `json:"drift"`
}

// NotifyDrift delivers d, signed as approval deliveries are, to each of
// webhooks (the table's webhook channels), with the same retries. It is
// for the gateway, which calls it once per drift found.
func (a approvals) NotifyDrift(ctx context.Context, d gateway.Drift, webhooks []string) {
	a.g.deliverDrift(d, webhooks)
}

func (g *Gate) deliverDrift(d gateway.Drift, webhooks []string) {
	s := termsafe.String
	d.Server, d.Kind, d.Name, d.Mode, d.Difference = s(d.Server), s(d.Kind), s(d.Name), s(d.Mode), s(d.Difference)
	body, err := json.Marshal(DriftEvent{Event: EventDrift, Drift: d})
	if err != nil {
		g.logger.Error("drift delivery not sent", "error", err.Error())
		return
	}
	// One id per drift: the same on every attempt and every channel.
	id := "drift-" + strings.TrimPrefix(d.Live, "sha256:")
	if len(id) > len("drift-")+16 {
		id = id[:len("drift-")+16]
	}
	o := g.cfg.Webhook
	for _, target := range webhooks {
		backoff := o.MinBackoff
		for attempt := 1; ; attempt++ {
			err := g.post(target, body, EventDrift, id, attempt)
			if err == nil {
				break
			}
			g.logger.Warn("drift delivery failed", "id", id, "attempt", attempt, "of", o.Attempts, "error", err.Error())
			if attempt == o.Attempts {
				g.logger.Error("drift delivery failed for good; the drift is in the gateway's log and its status", "id", id, "error", err.Error())
				break
			}
			select {
			case <-time.After(backoff):
			case <-g.ctx.Done():
				return
			}
			backoff = min(2*backoff, o.MaxBackoff)
		}
	}
}
