package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// The HTTP front answers the common tools/call itself, the one a client of
// an open session sends with nothing unusual about it, and hands every
// other request to the SDK's streamable handler. The answer is the one the
// SDK would write: the same checks pass it, the same code decides and
// forwards the call, and its response is encoded by the SDK's encoder and
// framed as the SDK frames an event.
//
// The reason is cost. The SDK decodes a tools/call six times on the way in
// (the body as a batch, then as a message, its method, and its params three
// times: for the transport's and the session's protocol checks and for the
// handler), and its JSON decoder allocates and zeroes a 32 KiB buffer for
// each; with the hand-off to a goroutine per request and the stream
// bookkeeping, the SDK's server side was a third of the gateway's CPU per
// call. Here the body is parsed once, with no such buffer.
//
// What the front must then do itself, it does for both paths: session
// idle time is counted by idleClock instead of the SDK (which counts only
// the requests it serves), and a client's notifications/cancelled reaches
// the calls it answers (fastCalls).

// fastToolCall answers POST request r, whose body has been read, when it is
// a tools/call of the open, initialized session ss of principal that the
// SDK would take and the front can answer alike. It reports whether it
// answered; when it did not, nothing was written and the SDK is to handle
// the request.
//
// It leaves to the SDK: a session that negotiated 2025-03-26 or asked for
// another version in its MCP-Protocol-Version header (or sent none); a
// Content-Type that is not application/json, an Accept without both
// application/json and text/event-stream, a Last-Event-ID, a Host the SDK
// refuses on a loopback address; a body that is not one JSON object with
// nothing after it, nests deeper than the SDK reads, or is not a
// "2.0" request with an id and method "tools/call"; params that are absent
// or do not decode as the SDK decodes them; a progress token (a held
// call's progress goes on the request's own stream, which only the SDK
// keeps) or a per-request protocol version in _meta; and an id already in
// flight in the session.
func (g *Gateway) fastToolCall(w http.ResponseWriter, r *http.Request, ti *auth.TokenInfo, ss *mcp.ServerSession, version string, body []byte) bool {
	if version < "2025-06-18" || version != sessionVersionOf(ss) {
		return false
	}
	if len(r.Header.Values("Last-Event-ID")) > 0 || !jsonContent(r.Header.Get("Content-Type")) || !acceptsBoth(r.Header.Values("Accept")) || hostRefused(r) {
		return false
	}
	req, params, ok := parseToolCall(body)
	if !ok {
		return false
	}
	key := fastKey{ss.ID(), idText(req.ID)}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	if !g.fast.add(key, cancel) {
		writeDuplicate(w, req.ID)
		return true
	}
	defer g.fast.remove(key)
	g.fastAnswered.Add(1)

	res, err := g.callTool(ctx, ti.UserID, &mcp.CallToolRequest{
		Session: ss,
		Params:  params,
		Extra:   &mcp.RequestExtra{TokenInfo: ti, Header: r.Header},
	})
	resp := &jsonrpc.Response{ID: req.ID, Error: err}
	if err == nil {
		// The SDK's encoding of a result: encoding/json, HTML left unescaped.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if merr := enc.Encode(res); merr != nil {
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encoding the result: " + merr.Error()}
		} else {
			resp.Result = bytes.TrimRight(buf.Bytes(), "\n")
		}
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		data, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}})
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	event := make([]byte, 0, len("event: message\ndata: \n\n")+len(data))
	event = append(event, "event: message\ndata: "...)
	event = append(event, data...)
	event = append(event, "\n\n"...)
	if _, err := w.Write(event); err == nil {
		_ = http.NewResponseController(w).Flush()
	}
	return true
}

// sdkCall registers the call in body, when it is one message with an id,
// as in flight in session until done is called, while the SDK answers it:
// a call the front takes under the same id is then refused, as the SDK
// refuses one in flight with it. ok is false when the front is answering a
// call of that id; the request is then answered as the SDK answers it.
func (g *Gateway) sdkCall(w http.ResponseWriter, session string, body []byte) (done func(), ok bool) {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return func() {}, true
	}
	var m struct {
		ID     any             `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	if _, err := segjson.Parse(b, &m, segjson.DontMatchCaseInsensitiveStructFields); err != nil || len(m.Method) == 0 {
		return func() {}, true
	}
	id, err := jsonrpc.MakeID(m.ID)
	if err != nil || !id.IsValid() {
		return func() {}, true
	}
	k := fastKey{session, idText(id)}
	if !g.fast.add(k, nil) {
		writeDuplicate(w, id)
		return nil, false
	}
	return func() { g.fast.remove(k) }, true
}

// writeDuplicate answers a call whose id is in flight as the SDK does.
func writeDuplicate(w http.ResponseWriter, id jsonrpc.ID) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("duplicate in-flight request ID %v", id.Raw()),
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	if err == nil {
		w.Write(data)
	}
}

// parseToolCall decodes body as the SDK decodes a single message and a
// tools/call's params, with the same decoder and options, and returns the
// request and its params when body is a tools/call the front answers.
func parseToolCall(body []byte) (*jsonrpc.Request, *mcp.CallToolParamsRaw, bool) {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '{' || tooDeep(b) {
		return nil, nil, false
	}
	var m struct {
		VersionTag string          `json:"jsonrpc"`
		ID         any             `json:"id,omitempty"`
		Method     json.RawMessage `json:"method"`
		Params     json.RawMessage `json:"params,omitempty"`
		Result     json.RawMessage `json:"result,omitempty"`
		Error      json.RawMessage `json:"error,omitempty"`
	}
	rest, err := segjson.Parse(b, &m, segjson.DontMatchCaseInsensitiveStructFields)
	if err != nil || len(bytes.TrimLeft(rest, " \t\r\n")) > 0 || m.VersionTag != "2.0" || m.Result != nil || m.Error != nil {
		return nil, nil, false
	}
	var method string
	if _, err := segjson.Parse(m.Method, &method, segjson.DontMatchCaseInsensitiveStructFields); err != nil || method != methodCallTool {
		return nil, nil, false
	}
	id, err := jsonrpc.MakeID(m.ID)
	if err != nil || !id.IsValid() || len(m.Params) == 0 {
		return nil, nil, false
	}
	var p *mcp.CallToolParamsRaw
	if rest, err := segjson.Parse(m.Params, &p, segjson.DontMatchCaseInsensitiveStructFields); err != nil || p == nil || len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		return nil, nil, false
	}
	if _, ok := p.Meta["progressToken"]; ok {
		return nil, nil, false
	}
	if _, ok := p.Meta[mcp.MetaKeyProtocolVersion]; ok {
		return nil, nil, false
	}
	return &jsonrpc.Request{ID: id, Method: method, Params: m.Params}, p, true
}

// sdkMaxDepth is the deepest nesting of objects and arrays the SDK decodes.
const sdkMaxDepth = 1000

// tooDeep reports whether b nests objects and arrays deeper than the SDK
// decodes (brackets inside strings do not count).
func tooDeep(b []byte) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if depth++; depth > sdkMaxDepth {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// jsonContent reports whether a Content-Type is application/json, as the
// SDK requires of a POST.
func jsonContent(v string) bool {
	t, _, err := mime.ParseMediaType(v)
	return err == nil && t == "application/json"
}

// acceptsBoth reports whether Accept values admit both application/json
// and text/event-stream, as the SDK requires of a POST.
func acceptsBoth(values []string) bool {
	var j, s bool
	for _, v := range values {
		for _, tok := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				j = true
			case "text/event-stream", "text/*":
				s = true
			case "*/*":
				j, s = true, true
			}
		}
	}
	return j && s
}

// hostRefused reports whether the SDK refuses r for its Host: a server
// listening on a loopback address takes only a loopback Host, against DNS
// rebinding.
func hostRefused(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && isLoopback(local.String()) && !isLoopback(r.Host)
}

// fastKey names a call the front answers: its session and id.
type fastKey struct{ session, id string }

// fastCalls are the calls in flight in each HTTP session: those the front
// answers, with what cancels them when their client says so, and those the
// SDK answers (with no cancel here; the SDK cancels them), so that an id is
// in flight once whichever path takes it.
type fastCalls struct {
	mu    sync.Mutex
	calls map[fastKey]context.CancelFunc
}

// add records call k, cancelled by cancel; false when k is in flight
// already.
func (f *fastCalls) add(k fastKey, cancel context.CancelFunc) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.calls[k]; dup {
		return false
	}
	if f.calls == nil {
		f.calls = map[fastKey]context.CancelFunc{}
	}
	f.calls[k] = cancel
	return true
}

func (f *fastCalls) remove(k fastKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.calls, k)
}

// cancelNamed cancels the call of session that a notifications/cancelled
// body names, if the front is answering it. The SDK is given the body too:
// a call it answers is cancelled there.
func (f *fastCalls) cancelNamed(session string, body []byte) {
	if !bytes.Contains(body, []byte("notifications/cancelled")) {
		return
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			RequestID any `json:"requestId"`
		} `json:"params"`
	}
	if _, err := segjson.Parse(body, &m, segjson.DontMatchCaseInsensitiveStructFields); err != nil || m.Method != "notifications/cancelled" {
		return
	}
	id, err := jsonrpc.MakeID(m.Params.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	f.mu.Lock()
	cancel := f.calls[fastKey{session, idText(id)}] // nil for the SDK's
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// idleClock closes an HTTP session after a while without a POST in flight,
// as the SDK's SessionTimeout does, counting the POSTs both the SDK and the
// front answer. A GET's stream does not count, as in the SDK.
//
// It holds no session: each POST looks its session up among the open ones
// (a deleted session is answered as absent at once), and a closed
// session's count is dropped when the client's DELETE is answered or, for
// a session closed otherwise, when its timer fires.
type idleClock struct {
	timeout time.Duration
	mu      sync.Mutex
	open    map[string]*idleCount // session id →
}

type idleCount struct {
	principal string
	busy      int       // POSTs in flight
	idleSince time.Time // when the last one ended
	timer     *time.Timer
}

// begin looks up session id of principal among srv's open sessions and
// counts a POST of it in flight until end is called. ss is nil when
// principal has no open session id; end is then a no-op.
func (c *idleClock) begin(srv *mcp.Server, principal, id string) (ss *mcp.ServerSession, end func()) {
	ss = openSession(srv, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.open[id]
	if ss == nil || n != nil && n.principal != principal {
		return nil, func() {}
	}
	if n == nil {
		n = &idleCount{principal: principal}
		if c.timeout > 0 {
			n.timer = time.AfterFunc(c.timeout, func() { c.expire(srv, id, n) })
		}
		if c.open == nil {
			c.open = map[string]*idleCount{}
		}
		c.open[id] = n
	}
	n.busy++
	if n.timer != nil {
		n.timer.Stop()
	}
	return ss, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if n.busy--; n.busy == 0 {
			n.idleSince = time.Now()
			if n.timer != nil {
				n.timer.Reset(c.timeout)
			}
		}
	}
}

// expire closes session id when it has been idle for the whole timeout;
// a POST may have begun, or begun and ended, since the timer fired.
func (c *idleClock) expire(srv *mcp.Server, id string, n *idleCount) {
	c.mu.Lock()
	if n.busy > 0 {
		c.mu.Unlock()
		return
	}
	if left := c.timeout - time.Since(n.idleSince); left > 0 {
		n.timer.Reset(left)
		c.mu.Unlock()
		return
	}
	delete(c.open, id)
	c.mu.Unlock()
	if ss := openSession(srv, id); ss != nil {
		ss.Close()
	}
}

// forget drops the count of session id once it is closed.
func (c *idleClock) forget(srv *mcp.Server, id string) {
	if openSession(srv, id) != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.open[id]; n != nil {
		if n.timer != nil {
			n.timer.Stop()
		}
		delete(c.open, id)
	}
}

// openSession is srv's open session id, nil when it has none of that id
// (or srv is nil).
func openSession(srv *mcp.Server, id string) *mcp.ServerSession {
	if srv == nil {
		return nil
	}
	for ss := range srv.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}
