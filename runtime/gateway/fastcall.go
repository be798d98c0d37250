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
// each, and it hands each request to a goroutine of its own. Here the body
// is parsed once, with no such buffer (docs/performance.md has the
// figures).
//
// What the SDK did for every request the front then does for both paths:
// it counts a session's idle time (idleClock), keeps the ids of the calls
// in flight in each session (fastCalls: a notifications/cancelled reaches
// a call the front answers, an id in flight is refused), and closes a
// session with its calls answered (httpFront.closing).

// fastToolCall answers POST request r, whose body has been read, when it is
// a tools/call of the open, initialized session ss of the principal of ti
// (one of srv's sessions) that the
// SDK would take and the front can answer alike. It reports whether it
// answered; when it did not, nothing was written and the SDK is to handle
// the request.
//
// The caller has checked that the SDK would read the request (sdkTakes).
// It leaves to the SDK: a session that negotiated 2025-03-26 or asked for
// another version in its MCP-Protocol-Version header (or sent none); a
// Last-Event-ID; a body that is not one JSON object with nothing after it,
// nests deeper than the SDK reads, or is not a "2.0" request with an id
// and method "tools/call"; params that are absent or do not decode as the
// SDK decodes them; a progress token (a held call's progress goes on the
// request's own stream, which only the SDK keeps) or a per-request
// protocol version in _meta; a session being closed; and an id of a call
// the SDK is answering. A call under the id of one the front is answering
// is refused as the SDK refuses an id in flight.
func (g *Gateway) fastToolCall(w http.ResponseWriter, r *http.Request, ti *auth.TokenInfo, srv *mcp.Server, ss *mcp.ServerSession, version string, body []byte) bool {
	if version < "2025-06-18" || version != sessionVersionOf(ss) || len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	req, params, ok := parseToolCall(body)
	if !ok {
		return false
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	release, taken := g.fast.takeFast(srv, ss.ID(), ti.UserID, idText(req.ID), cancel)
	switch taken {
	case declined:
		return false
	case duplicate:
		writeDuplicate(w, req.ID)
		return true
	}
	defer release()
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
	streamHeaders(w)
	event := make([]byte, 0, len("event: message\ndata: \n\n")+len(data))
	event = append(event, "event: message\ndata: "...)
	event = append(event, data...)
	event = append(event, "\n\n"...)
	if _, err := w.Write(event); err == nil {
		_ = http.NewResponseController(w).Flush()
	}
	return true
}

// streamHeaders sets the headers the SDK sets on the answer to a POST
// with a call, before it looks for the call's id among those in flight.
func streamHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
}

// writeDuplicate answers a call whose id is in flight as the SDK does.
func writeDuplicate(w http.ResponseWriter, id jsonrpc.ID) {
	streamHeaders(w)
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

// sdkTakes reports whether the SDK's handler reads a POST request r of an
// open session rather than refusing it first: its Host passes the check
// against DNS rebinding, its Content-Type is application/json and its
// Accept admits both application/json and text/event-stream. (Its
// MCP-Protocol-Version was checked before.) Only then does the SDK count
// the request against the session's idle time.
func sdkTakes(r *http.Request) bool {
	return !hostRefused(r) && jsonContent(r.Header.Get("Content-Type")) && acceptsBoth(r.Header.Values("Accept"))
}

// toSDK is what the front does with a POST of session it hands to the SDK:
// a call's id is registered as in flight until release is called, so the
// front leaves a call under the same id to the SDK, which refuses it; and a
// notifications/cancelled the SDK would act on cancels the front's call it
// names. The caller has checked that the SDK reads the request (sdkTakes).
func (f *fastCalls) toSDK(r *http.Request, srv *mcp.Server, session, principal string, body []byte) (release func()) {
	release = func() {}
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		return release
	}
	m, ok := parseMessage(body)
	switch {
	case !ok:
	case m.ID.IsValid():
		release = f.takeSDK(srv, session, principal, idText(m.ID))
	default:
		f.cancelNamed(session, m)
	}
	return release
}

// cancelNamed cancels the front's call of session that notification m
// names, when m is a notifications/cancelled.
func (f *fastCalls) cancelNamed(session string, m *jsonrpc.Request) {
	if m.ID.IsValid() || m.Method != "notifications/cancelled" || len(m.Params) == 0 {
		return
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if _, err := segjson.Parse(m.Params, &p, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return
	}
	if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
		f.cancel(session, idText(id))
	}
}

// closingAnswer answers a request of session of principal while the
// session is being closed (close), and reports whether it did. A
// notification goes to the SDK while it still has the session open (open),
// where a notifications/cancelled reaches the call it names on either path
// (toSDK); once the SDK has let the session go, it is taken here (202) and
// still reaches the front's call. Any other request is answered as one of
// a closed session is (404), where the SDK, closing, would take it and
// answer nothing.
func (f *fastCalls) closingAnswer(w http.ResponseWriter, session, principal string, open bool, body []byte) bool {
	f.mu.Lock()
	sc := f.sessions[session]
	closing := sc != nil && sc.closing && sc.principal == principal
	f.mu.Unlock()
	if !closing {
		return false
	}
	if m, ok := parseMessage(body); ok && !m.ID.IsValid() {
		if open {
			return false
		}
		f.cancelNamed(session, m)
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	http.Error(w, "session not found", http.StatusNotFound)
	return true
}

// parseMessage decodes body as the SDK decodes a single request or
// notification, with the same decoder and options: ok is false for
// anything else, or what the SDK would not decode, or decode otherwise.
// A notification's ID is the zero ID.
func parseMessage(body []byte) (*jsonrpc.Request, bool) {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '{' || tooDeep(b) {
		return nil, false
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
	if err != nil || len(bytes.TrimLeft(rest, " \t\r\n")) > 0 || m.VersionTag != "2.0" || m.Result != nil || m.Error != nil || len(m.Method) == 0 {
		return nil, false
	}
	var method string
	if _, err := segjson.Parse(m.Method, &method, segjson.DontMatchCaseInsensitiveStructFields); err != nil || method == "" {
		return nil, false
	}
	id, err := jsonrpc.MakeID(m.ID)
	if err != nil {
		return nil, false
	}
	return &jsonrpc.Request{ID: id, Method: method, Params: m.Params}, true
}

// parseToolCall decodes body as the SDK decodes a single message and a
// tools/call's params, with the same decoder and options, and returns the
// request and its params when body is a tools/call the front answers.
func parseToolCall(body []byte) (*jsonrpc.Request, *mcp.CallToolParamsRaw, bool) {
	req, ok := parseMessage(body)
	if !ok || req.Method != methodCallTool || !req.ID.IsValid() || len(req.Params) == 0 {
		return nil, nil, false
	}
	var p *mcp.CallToolParamsRaw
	if rest, err := segjson.Parse(req.Params, &p, segjson.DontMatchCaseInsensitiveStructFields); err != nil || p == nil || len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		return nil, nil, false
	}
	if _, ok := p.Meta["progressToken"]; ok {
		return nil, nil, false
	}
	if _, ok := p.Meta[mcp.MetaKeyProtocolVersion]; ok {
		return nil, nil, false
	}
	return req, p, true
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
	if v == "application/json" {
		return true // as clients send it; parsing allocates
	}
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

// fastCalls are the calls in flight in each HTTP session, by id: those the
// front answers, with what cancels them when their client says so, and
// those handed to the SDK (which cancels its own). An id is in flight once
// in a session whichever path takes it, as in the SDK alone. A session's
// entry is kept until it is closed (close), by DELETE or the idle clock.
type fastCalls struct {
	mu       sync.Mutex
	sessions map[string]*sessionCalls
}

type sessionCalls struct {
	principal string                        // whose session it is
	calls     map[string]context.CancelFunc // id text → cancel; nil for the SDK's
	// closing is set once the session is being closed: no call of it is
	// taken after, on either path, and inFlight waits for those taken.
	closing  bool
	inFlight sync.WaitGroup
}

// Outcomes of takeFast.
const (
	taken     = iota
	declined  // the SDK is to handle the call
	duplicate // the front is answering a call of that id
)

// takeFast registers call id of session for the front to answer, ended by
// cancel when its client cancels it; release forgets it. The outcome is
// declined when the session is closing or the SDK holds a call of that id,
// and duplicate when the front does.
func (f *fastCalls) takeFast(srv *mcp.Server, session, principal, id string, cancel context.CancelFunc) (release func(), outcome int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sc := f.session(srv, session, principal)
	if sc == nil {
		return nil, declined
	}
	if sc.closing {
		return nil, declined
	}
	if c, held := sc.calls[id]; held {
		if c == nil {
			return nil, declined
		}
		return nil, duplicate
	}
	return f.register(sc, id, cancel), taken
}

// register records call id of sc, cancelled by cancel (nil for the SDK's),
// and returns what forgets it. f.mu is held.
func (f *fastCalls) register(sc *sessionCalls, id string, cancel context.CancelFunc) (release func()) {
	sc.calls[id] = cancel
	sc.inFlight.Add(1)
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(sc.calls, id)
		sc.inFlight.Done()
	}
}

// takeSDK registers call id of session of principal, handed to the SDK,
// unless a call of that id is in flight already (the SDK takes it then,
// not knowing the front's); release forgets it.
func (f *fastCalls) takeSDK(srv *mcp.Server, session, principal, id string) (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sc := f.session(srv, session, principal)
	if sc == nil {
		return func() {}
	}
	if _, held := sc.calls[id]; held || sc.closing {
		return func() {}
	}
	return f.register(sc, id, nil)
}

// cancel cancels the front's call id of session, if any.
func (f *fastCalls) cancel(session, id string) {
	f.mu.Lock()
	var cancel context.CancelFunc
	if sc := f.sessions[session]; sc != nil {
		cancel = sc.calls[id]
	}
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// close marks session as being closed: no call of it is taken after, on
// either path (closingAnswer answers the requests). wait waits for the
// calls taken before to be answered, so that their answers are written
// before the SDK closes the session (and drops what it has not written);
// forget then forgets the session.
func (f *fastCalls) close(session, principal string) (wait, forget func()) {
	f.mu.Lock()
	sc := f.sessions[session]
	if sc == nil {
		sc = f.add(session, principal)
	}
	sc.closing = true
	f.mu.Unlock()
	return sc.inFlight.Wait, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.sessions[session] == sc {
			delete(f.sessions, session)
		}
	}
}

// inFlight is the number of calls in flight in all sessions.
func (f *fastCalls) inFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, sc := range f.sessions {
		n += len(sc.calls)
	}
	return n
}

// session is the calls of session of principal, made on first use if srv
// still has the session open, else nil. f.mu is held. A session that its DELETE or the
// idle clock closed has its entry removed only once the SDK has let it go
// (close), so a call that raced the close either registered in the entry
// before it was marked closing, and is waited for, or finds the session
// gone here.
func (f *fastCalls) session(srv *mcp.Server, session, principal string) *sessionCalls {
	if sc := f.sessions[session]; sc != nil {
		return sc
	}
	if openSession(srv, session) == nil {
		return nil
	}
	return f.add(session, principal)
}

// add makes the entry of session of principal. f.mu is held.
func (f *fastCalls) add(session, principal string) *sessionCalls {
	sc := &sessionCalls{principal: principal, calls: map[string]context.CancelFunc{}}
	if f.sessions == nil {
		f.sessions = map[string]*sessionCalls{}
	}
	f.sessions[session] = sc
	return sc
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
	// closing readies a session of principal to be closed (httpFront.closing).
	closing func(session, principal string) (wait, forget func())
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
		if n.busy--; n.busy == 0 && c.open[id] == n {
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
	if n.busy > 0 || c.open[id] != n {
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
	wait, forget := c.closing(id, n.principal)
	wait()
	if ss := openSession(srv, id); ss != nil {
		ss.Close()
	}
	forget()
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
