package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// MCP methods the gateway answers itself.
const (
	methodListTools     = "tools/list"
	methodCallTool      = "tools/call"
	methodListPrompts   = "prompts/list"
	methodGetPrompt     = "prompts/get"
	methodListResources = "resources/list"
	methodListTemplates = "resources/templates/list"
	methodReadResource  = "resources/read"
)

// middleware answers every method that touches an upstream's items; the
// SDK answers the rest (initialize, ping, discovery, notifications).
func (g *Gateway) middleware(principal string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			// The HTTP front binds a session to the principal whose token
			// opened it; a request under another token is refused.
			if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil && ex.TokenInfo.UserID != principal {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "this session belongs to another principal"}
			}
			switch r := req.(type) {
			case *mcp.ListToolsRequest:
				return g.listTools(ctx, principal, r)
			case *mcp.CallToolRequest:
				res, err := g.callTool(ctx, principal, r)
				return completed(r.Session, &completeCall, res, err)
			case *mcp.ListPromptsRequest:
				return g.listPrompts(ctx, principal, r)
			case *mcp.GetPromptRequest:
				res, err := g.getPrompt(ctx, principal, r)
				return completed(r.Session, &completePrompt, res, err)
			case *mcp.ListResourcesRequest:
				return g.listResources(ctx, principal, r)
			case *mcp.ListResourceTemplatesRequest:
				return g.listTemplates(ctx, principal, r)
			case *mcp.ReadResourceRequest:
				res, err := g.readResource(ctx, principal, r)
				return completed(r.Session, &completeRead, res, err)
			case *mcp.CompleteRequest, *mcp.SubscribeRequest, *mcp.UnsubscribeRequest:
				// Not offered: completions and subscriptions name prompts
				// and resources, and would need enforcement of their own.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s is not supported by this gateway", method)}
			}
			return next(ctx, method, req)
		}
	}
}

// completed is res, the gateway's answer in session ss, marked complete
// (resultType) when ss speaks 2026-07-28 or later, as every result of
// those versions is. The MCP Go SDK v1.8.0 marks the results of
// tools/call, prompts/get and resources/read only in its own handlers of
// them, which the gateway's middleware answers before, and keeps the mark
// in an unexported field that only its JSON decoder sets
// (TestSDKMarksOnlyItsOwnResultsComplete fails when that changes): so the
// answer is copied onto a result decoded once with the mark (tmpl).
func completed[T any, PT interface {
	*T
	mcp.Result
}](ss *mcp.ServerSession, tmpl *T, res mcp.Result, err error) (mcp.Result, error) {
	r, ok := res.(PT)
	if err != nil || !ok || r == nil {
		return res, err
	}
	if ss == nil || ss.InitializeParams() == nil || ss.InitializeParams().ProtocolVersion < firstSessionless {
		return res, nil
	}
	out := *tmpl
	dst, src := reflect.ValueOf(&out).Elem(), reflect.ValueOf(r).Elem()
	for i := range dst.NumField() {
		if dst.Type().Field(i).IsExported() {
			dst.Field(i).Set(src.Field(i))
		}
	}
	return PT(&out), nil
}

// Results decoded with resultType "complete", for completed.
var (
	completeCall   = decodeComplete[mcp.CallToolResult](`{"content":[],"resultType":"complete"}`)
	completePrompt = decodeComplete[mcp.GetPromptResult](`{"messages":[],"resultType":"complete"}`)
	completeRead   = decodeComplete[mcp.ReadResourceResult](`{"contents":[],"resultType":"complete"}`)
)

func decodeComplete[T any](s string) T {
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err)
	}
	return v
}

// absent is the answer for a tool, prompt or resource that does not exist,
// and, through the same code, for one the table denies: the same error
// code, message and data, built from the name the client sent. The texts
// are the Go SDK's own for an item a server does not have.
func absent(method, name string) error {
	switch method {
	case methodCallTool:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	case methodGetPrompt:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", name)}
	}
	return resourceNotFound(name)
}

// resourceNotFound is the SDK's error for a resource a server does not
// have (mcp.ResourceNotFoundError: its code, message and data), with its
// data encoded as JSON. The MCP Go SDK v1.8.0 writes the URI with Go's %q,
// which is not JSON for a control character, DEL or a rune it cannot
// print: the answer to such a URI broke the connection
// (TestSDKResourceNotFoundErrorIsNotJSON fails when that changes, and the
// SDK's function can be used again). As with %q, '<', '>' and '&' are
// written as they are.
func resourceNotFound(uri string) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		URI string `json:"uri"`
	}{uri})
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidParams,
		Message: "Resource not found",
		Data:    json.RawMessage(bytes.TrimSuffix(b.Bytes(), []byte("\n"))),
	}
}

// upstreamAnswer returns the JSON-RPC error an upstream answered a call
// with. Errors the SDK makes up locally for a transport that failed (codes
// -32001, -32003, -32004, -32005) are not answers: they are reported as the
// upstream's failure.
func upstreamAnswer(err error) (*jsonrpc.Error, bool) {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return nil, false
	}
	switch we.Code {
	case -32001, -32003, -32004, -32005:
		return nil, false
	}
	return we, true
}

// codeLegacyResourceNotFound is the "resource not found" code of servers
// written before the specification settled on invalid params.
const codeLegacyResourceNotFound = -32002

// errLogFailed answers every request, whatever the decision, while the
// decision log cannot be written.
var errLogFailed = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "policyc gateway: the decision log cannot be written, so no decision is acted on; see the gateway's log"}

// decide decides and records one decision.
func (g *Gateway) decide(t *decide.Table, principal, server string, kind table.Kind, name string, op Op) (decide.Decision, error) {
	now := g.now()
	d := tableDecide(t, now, principal, server, kind, name)
	if served, verdict := audit(t, server, d); verdict != "" {
		r := record(t, now, principal, server, kind, name, op, d)
		r.Verdict = verdict
		return g.logAudited(r, served)
	}
	return g.logDecision(t, now, principal, server, kind, name, op, d)
}

// tableDecide is t's decision at now: nothing is allowed once the table
// has expired.
func tableDecide(t *decide.Table, now time.Time, principal, server string, kind table.Kind, name string) decide.Decision {
	if t.Expired(now) {
		return decide.Decision{Effect: table.Deny, Reason: decide.TableExpired}
	}
	return t.Decide(principal, server, kind, name)
}

// logDecision writes the record of d, made at now, and returns d, or a
// deny when the record could not be written.
func (g *Gateway) logDecision(t *decide.Table, now time.Time, principal, server string, kind table.Kind, name string, op Op, d decide.Decision) (decide.Decision, error) {
	var err error
	if jl, ok := g.cfg.Log.(*JSONLog); ok {
		r := record(t, now, principal, server, kind, name, op, d) // the command's log: the record stays on the stack
		err = jl.Log(&r)
	} else {
		r := record(t, now, principal, server, kind, name, op, d)
		err = g.cfg.Log.Log(&r)
	}
	if err != nil {
		g.obs.logWritten(err)
		g.logger.Error("decision log write failed", "error", err.Error())
		return decide.Decision{Effect: table.Deny}, errLogFailed
	}
	if g.obs != nil {
		g.obs.logWritten(nil)
		g.obs.decided(server, kind, op, d.Effect, 1)
	}
	return d, nil
}

func record(t *decide.Table, now time.Time, principal, server string, kind table.Kind, name string, op Op, d decide.Decision) Record {
	return Record{
		Time: now, Principal: principal, Server: server, Kind: kind, Name: name, Op: op,
		Decision: d, TableDigest: t.Digest(), TableSerial: t.Serial(),
	}
}

// listing decides the items of one listing for one principal against one
// table, and counts the decisions by server, kind and op, to be logged
// together once every item is decided: a listing of n items costs one
// write to the log, not n. Its record is one line of counts (a ListingLog),
// or, for a log that records only decisions one by one, the records of
// every item.
type listing struct {
	g         *Gateway
	ctx       context.Context
	t         *decide.Table
	now       time.Time
	principal string
	method    string
	// summary is set when the log is a ListingLog: no record is kept per
	// item, and the names hidden are hashed instead.
	summary bool
	recs    []Record
	groups  []listGroup
	// links holds the link decisions made, by server and URI.
	links map[string]bool
	// dry is set for a listing no client asked for (to see whether a
	// principal's listing changed): it decides without logging.
	dry bool
	// held is set once a tool held for approval is listed.
	held bool
}

// listGroup counts a listing's decisions about one server's items of one
// kind and op, and hashes the names it hides.
type listGroup struct {
	ListingGroup
	hash hash.Hash
	buf  []byte
}

func (g *Gateway) listing(ctx context.Context, principal, method string) *listing {
	_, summary := g.cfg.Log.(ListingLog)
	return &listing{g: g, ctx: ctx, t: g.table.Load(), now: g.now(), principal: principal, method: method, summary: summary}
}

// group returns the group of (server, kind, op), adding it when new.
func (l *listing) group(server string, kind table.Kind, op Op) *listGroup {
	for i := len(l.groups) - 1; i >= 0; i-- {
		if g := &l.groups[i]; g.Server == server && g.Kind == kind && g.Op == op {
			return g
		}
	}
	l.groups = append(l.groups, listGroup{ListingGroup: ListingGroup{Server: server, Kind: kind, Op: op}})
	return &l.groups[len(l.groups)-1]
}

// hide records that the item (server, kind, name) decided by op is left
// out of the listing (a link, dropped).
func (l *listing) hide(server string, kind table.Kind, op Op, name string) {
	if l.dry {
		return
	}
	g := l.group(server, kind, op)
	g.Hidden++
	if !l.summary {
		return
	}
	if g.hash == nil {
		g.hash = sha256.New()
	}
	g.buf = append(appendString(g.buf[:0], name), '\n')
	g.hash.Write(g.buf)
}

// decide decides one item; the decision takes effect only if log succeeds.
// A dry listing keeps no records.
func (l *listing) decide(server string, kind table.Kind, name string, op Op) decide.Decision {
	d := tableDecide(l.t, l.now, l.principal, server, kind, name)
	served, verdict := audit(l.t, server, d)
	if kind == table.Tool && served.Effect == table.Approve {
		l.held = true
	}
	if !l.dry {
		l.group(server, kind, op).Counts[d.Effect]++
		if !l.summary {
			r := record(l.t, l.now, l.principal, server, kind, name, op, d)
			r.Verdict = verdict // would_deny or would_hold in audit mode
			l.recs = append(l.recs, r)
		}
	}
	return served
}

// log records every decision of the listing. When it fails, the listing
// is not answered.
func (l *listing) log() error {
	if l.dry {
		return nil
	}
	var err error
	switch lg := l.g.cfg.Log.(type) {
	case ListingLog:
		r := ListingRecord{Time: l.now, Principal: l.principal, Method: l.method, Groups: make([]ListingGroup, len(l.groups)),
			TableDigest: l.t.Digest(), TableSerial: l.t.Serial()}
		for i := range l.groups {
			g := &l.groups[i]
			r.Groups[i] = g.ListingGroup
			if g.hash != nil {
				r.Groups[i].HiddenDigest = "sha256:" + hex.EncodeToString(g.hash.Sum(nil))
			}
		}
		err = lg.LogListing(&r)
	case BatchLog:
		err = lg.LogAll(l.recs)
	default:
		for i := range l.recs {
			if err = lg.Log(&l.recs[i]); err != nil {
				break
			}
		}
	}
	l.g.obs.logWritten(err)
	if err != nil {
		l.g.logger.Error("decision log write failed", "error", err.Error())
		return errLogFailed
	}
	var total [3]int
	for i := range l.groups {
		g := &l.groups[i]
		for e, n := range g.Counts {
			l.g.obs.decided(g.Server, g.Kind, g.Op, table.Effect(e), n)
			if g.Op == OpList {
				total[e] += n
			}
		}
	}
	if l.ctx != nil {
		traceListing(l.ctx, l.t, total)
	}
	return nil
}

// noCursor refuses a cursor: the gateway returns every item in one page.
func noCursor(cursor string) error {
	if cursor == "" {
		return nil
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: this gateway returns every item in one page"}
}

// private marks listings and reads as fit for the asking principal only:
// they are filtered per principal, so no shared cache may keep them.
var private = mcp.Cacheable{CacheScope: "private"}

func (g *Gateway) listTools(ctx context.Context, principal string, r *mcp.ListToolsRequest) (mcp.Result, error) {
	if r.Params != nil {
		if err := noCursor(r.Params.Cursor); err != nil {
			return nil, err
		}
	}
	tools, err := g.tools(g.listing(ctx, principal, methodListTools))
	if err != nil {
		return nil, err
	}
	return &mcp.ListToolsResult{Cacheable: private, Tools: tools}, nil
}

// tools is the tools listing of ls's principal: the upstreams' tools it
// may call, and the wait tool when one of them is held for approval and
// the gate can be waited on.
func (g *Gateway) tools(ls *listing) ([]*mcp.Tool, error) {
	tools, err := g.upstreamTools(ls)
	if err == nil && ls.held && g.waiter() != nil {
		tools = append(tools, waitTool)
	}
	return tools, err
}

func (g *Gateway) upstreamTools(ls *listing) ([]*mcp.Tool, error) {
	// Held tools are listed: the hold happens on the call.
	return listNamed(ls, table.Tool, table.Approve,
		func(c *catalogue) []*mcp.Tool { return c.tools }, func(tool *mcp.Tool) string { return tool.Name },
		func(u *upstream, tool *mcp.Tool) *mcp.Tool {
			c := *tool
			c.Name = Join(u.name, tool.Name)
			c.Meta = ls.listedMeta(u.name, tool.Meta)
			return &c
		})
}

// listNamed lists the items of every connected upstream whose decision for
// the listing's principal grants at least least, as the copies copyAs makes
// of them (namespaced). The items are returned only once their decisions
// are logged.
func listNamed[T any](ls *listing, kind table.Kind, least table.Effect,
	items func(*catalogue) []T, name func(T) string, copyAs func(*upstream, T) T) ([]T, error) {
	out := []T{}
	pins := ls.g.pinsOf(ls.t)
	for _, u := range ls.g.ups {
		st := u.snapshot()
		if st.session == nil || st.cat == nil {
			continue
		}
		for _, it := range items(st.cat) {
			if pins.hides(u.name, kind, name(it), st.cat) {
				continue // drifted or not catalogued: as absent as a denied item
			}
			if n := name(it); ls.decide(u.name, kind, n, OpList).Effect < least {
				ls.hide(u.name, kind, OpList, n)
				continue
			}
			out = append(out, copyAs(u, it))
		}
	}
	if err := ls.log(); err != nil {
		return nil, err
	}
	return out, nil
}

// UI link keys of a tool's _meta: SEP-1865's ui.resourceUri, and the flat
// key earlier drafts used.
const (
	metaUI        = "ui"
	metaUIURI     = "resourceUri"
	metaUIFlatURI = "ui/resourceUri"
)

// listedMeta returns the _meta of a listed item as the listing's
// principal may see it: without the keys of the reserved namespace (the
// upstream's identity), and without links to ui:// resources the
// principal could not read. A link is SEP-1865's ui.resourceUri, the flat
// key earlier drafts used, or any other string naming a ui:// URI, at any
// depth (hosts have keys of their own); a ui.resourceUri that is not a
// string is dropped too, and so is an object or list left empty by the
// removals. meta itself is never modified.
func (ls *listing) listedMeta(server string, meta mcp.Meta) mcp.Meta {
	if len(meta) == 0 {
		return meta
	}
	out := make(mcp.Meta, len(meta))
	for k, v := range meta {
		if strings.HasPrefix(k, reservedMeta) || k == metaUIFlatURI && !ls.linkReadable(server, v) {
			continue
		}
		if ui, ok := v.(map[string]any); ok && k == metaUI {
			if link, has := ui[metaUIURI]; has && !ls.linkReadable(server, link) {
				ui = maps.Clone(ui)
				delete(ui, metaUIURI)
				if len(ui) == 0 {
					continue
				}
				v = ui
			}
		}
		if nv, keep := ls.withoutHiddenLinks(server, v); keep {
			out[k] = nv
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// withoutHiddenLinks returns v without the ui:// links the listing's
// principal could not follow; keep is false when v is such a link, or an
// object or list that held only such links.
func (ls *listing) withoutHiddenLinks(server string, v any) (_ any, keep bool) {
	switch x := v.(type) {
	case string:
		if len(x) >= len("ui://") && strings.EqualFold(x[:len("ui://")], "ui://") {
			return x, ls.linkReadable(server, x)
		}
	case map[string]any:
		if len(x) == 0 {
			return x, true
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			if ne, keep := ls.withoutHiddenLinks(server, e); keep {
				out[k] = ne
			}
		}
		return out, len(out) > 0
	case []any:
		if len(x) == 0 {
			return x, true
		}
		out := make([]any, 0, len(x))
		for _, e := range x {
			if ne, keep := ls.withoutHiddenLinks(server, e); keep {
				out = append(out, ne)
			}
		}
		return out, len(out) > 0
	}
	return v, true
}

func (ls *listing) linkReadable(server string, link any) bool {
	uri, ok := link.(string)
	if !ok {
		return false
	}
	// A listing decides (and logs) each link once, however many items
	// carry it.
	key := server + "\x00" + uri
	if readable, ok := ls.links[key]; ok {
		return readable
	}
	d := ls.decide(server, table.Resource, uri, OpLink)
	readable := d.Effect == table.Allow && (!d.Consent || ls.g.cfg.Consent != nil)
	if !readable {
		ls.hide(server, table.Resource, OpLink, uri)
	}
	if ls.links == nil {
		ls.links = map[string]bool{}
	}
	ls.links[key] = readable
	return readable
}

// authorizedCall is a tools/call the table and the catalogue let through.
type authorizedCall struct {
	u        *upstream
	st       *upState
	tool     string
	decision decide.Decision
	table    *decide.Table
}

// authorizeCall is the policy work of a tools/call: split the name,
// decide, record, check the tool exists. A denied tool and a tool that does
// not exist take the same return, absent.
func (g *Gateway) authorizeCall(principal, name string) (authorizedCall, error) {
	server, tool := splitAsked(name)
	t := g.table.Load()
	d, err := g.decide(t, principal, server, table.Tool, tool, OpCall)
	if err != nil {
		return authorizedCall{}, err
	}
	u := g.byName[server]
	if d.Effect == table.Deny || u == nil {
		return authorizedCall{tool: tool, decision: d, table: t}, absent(methodCallTool, name)
	}
	st := u.snapshot()
	if g.toolServed(t, server, st.cat, tool) != nil {
		return authorizedCall{tool: tool, decision: d, table: t}, absent(methodCallTool, name)
	}
	return authorizedCall{u: u, st: st, tool: tool, decision: d, table: t}, nil
}

// toolServed says why the upstream server's tool is not served by table t,
// given the upstream's listing cat: not offered, or not as its pin says;
// nil when it is served.
func (g *Gateway) toolServed(t *decide.Table, server string, cat *catalogue, tool string) error {
	if cat == nil || cat.toolIdx[tool] == nil {
		return errors.New("the upstream no longer offers the tool")
	}
	if g.pinsOf(t).hides(server, table.Tool, tool, cat) {
		return fmt.Errorf("the tool's definition changed upstream and is not the one the serving table (serial %d) reviewed", t.Serial())
	}
	return nil
}

func (g *Gateway) callTool(ctx context.Context, principal string, r *mcp.CallToolRequest) (mcp.Result, error) {
	args, err := objectArguments(r.Params.Arguments)
	if err != nil {
		return nil, err
	}
	if r.Params.Name == WaitToolName && g.waiter() != nil {
		return g.callWaitTool(ctx, principal, r, args)
	}
	a, err := g.authorizeCall(principal, r.Params.Name)
	if g.tracer != nil && a.table != nil {
		server, _ := splitAsked(r.Params.Name)
		traceDecision(ctx, a.table, server, a.tool, a.decision)
	}
	if err != nil {
		return nil, err
	}
	if a.st.session == nil {
		return toolError(a.u.unavailable(a.st).Error()), nil
	}
	if a.decision.Effect == table.Approve {
		reviewed, refusal, err := g.hold(ctx, principal, r, a, args)
		if err != nil || refusal != nil {
			return refusal, err
		}
		// What was reviewed is what runs: the canonical bytes the gate saw.
		args = reviewed
	}
	meta, done := g.forwardMeta(r.Params.Meta, r.Session, a.u)
	defer done()
	meta = g.traceForward(ctx, meta)
	cctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	start := time.Now()
	res, err := a.st.session.CallTool(cctx, &mcp.CallToolParams{Name: a.tool, Arguments: args, Meta: meta})
	g.traceUpstream(ctx, err)
	if g.obs != nil {
		g.obs.called(a.u.name, time.Since(start), callResult(res, err))
	}
	if err != nil {
		if we, ok := upstreamAnswer(err); ok {
			return nil, we // the upstream's own answer about an allowed tool
		}
		return toolError(a.u.callError(cctx, a.st, methodCallTool, err).Error()), nil
	}
	res.Meta = stripMeta(res.Meta)
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return res, nil
}

// callResult is the result label of a forwarded call's metrics: "ok",
// "error" for the tool's execution error or the upstream's JSON-RPC error,
// "failed" when the upstream gave no answer.
func callResult(res *mcp.CallToolResult, err error) string {
	if err != nil {
		if _, ok := upstreamAnswer(err); ok {
			return "error"
		}
		return "failed"
	}
	if res.IsError {
		return "error"
	}
	return "ok"
}

// objectArguments checks that tools/call arguments are a JSON object (or
// absent or null, which mean no arguments) and returns them as an object.
// The check comes before the name is looked at, so its answer is the same
// for every name.
func objectArguments(raw json.RawMessage) (json.RawMessage, error) {
	v := bytes.TrimSpace(raw)
	if len(v) == 0 || string(v) == "null" {
		return json.RawMessage("{}"), nil
	}
	if v[0] == '{' {
		return v, nil
	}
	kind := "a string"
	switch {
	case v[0] == '[':
		kind = "an array"
	case v[0] == 't' || v[0] == 'f':
		kind = "a boolean"
	case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
		kind = "a number"
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tools/call: \"arguments\" must be a JSON object (name → value), got %s", kind)}
}

// toolError is a tool execution error: the client's model sees it.
func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// hold hands a call on approval to the approval gate and waits for its
// verdict. It returns the canonical arguments to forward when approved,
// else the result to answer with.
func (g *Gateway) hold(ctx context.Context, principal string, r *mcp.CallToolRequest, a authorizedCall, args json.RawMessage) (json.RawMessage, *mcp.CallToolResult, error) {
	name := r.Params.Name
	canon, err := CanonicalJSON(args)
	if err != nil {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call: " + err.Error()}
	}
	d := a.decision
	timeout := time.Duration(d.ApprovalTimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = DefaultRequestLife
	}
	recheck := func() error {
		t := g.table.Load()
		if d := tableDecide(t, g.now(), principal, a.u.name, table.Tool, a.tool); d.Effect == table.Deny {
			if d.Reason == decide.TableExpired {
				return fmt.Errorf("the serving table (serial %d) has expired", t.Serial())
			}
			return fmt.Errorf("the serving table (serial %d) denies the call now", t.Serial())
		}
		// What was approved is a call of the reviewed definition.
		return g.toolServed(t, a.u.name, a.u.snapshot().cat, a.tool)
	}
	req := &HoldRequest{
		Principal: principal, Server: a.u.name, Tool: a.tool, Arguments: canon, Fingerprint: Fingerprint(canon),
		Origin: d.Origin, Timeout: timeout, Channel: d.ApprovalChannel,
		TableDigest: a.table.Digest(), TableSerial: a.table.Serial(),
		Recheck: recheck,
	}
	if r.Session != nil {
		req.Session = r.Session.ID()
	}
	if ci := r.ClientInfo(); ci != nil {
		req.Client = strings.TrimSpace(ci.Name + " " + ci.Version)
	}
	req.HoldFor = g.cfg.Holds.holdFor(principal, clientName(r), r.Params.GetProgressToken() != nil && r.Session != nil)
	if tok := r.Params.GetProgressToken(); tok != nil && r.Session != nil {
		var n float64
		req.Progress = func(message string) {
			n++
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_ = r.Session.NotifyProgress(pctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: n, Message: message})
		}
	}
	var v Verdict
	verdict := "error"
	if g.cfg.Approvals == nil {
		err = errors.New("no approval gate is configured")
	} else {
		// The gate answers when the hold in place ends or the request
		// expires; no call outlives its request (and a second more, so
		// that the request's own expiry comes first), whatever the gate
		// does.
		hctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
		var sessionEnded, clientGone atomic.Bool
		if req.Session != "" {
			remove := g.held.add(req.Session, principal, func() { sessionEnded.Store(true); cancel() })
			defer remove()
		}
		defer g.held.watchPost(r, func() { clientGone.Store(true); cancel() })()
		held := g.obs.holding()
		defer func() { held(verdict) }()
		v, err = g.cfg.Approvals.Hold(hctx, req)
		switch {
		case sessionEnded.Load():
			// The session ended (deleted, or closed idle): whatever the gate made of
			// the cancelled hold, that is what happened.
			verdict, err = "ended", errors.New("the session ended while the call was held (the client deleted it, or it was closed idle)")
		case err == nil && v.Approved:
			if rerr := recheck(); rerr != nil {
				verdict, v.Reason = "not_run", rerr.Error()
			} else {
				verdict = "approved"
			}
		case err == nil && v.Outcome == OutcomePending && (clientGone.Load() || ctx.Err() != nil):
			// The call was given up (cancelled, or its client went
			// away); its request goes on.
			verdict = "cancelled"
		case err == nil && v.Outcome == OutcomePending:
			verdict = "pending"
		case err == nil && v.Outcome == OutcomeRefused:
			verdict = "refused"
		case clientGone.Load() || ctx.Err() != nil && (err == nil && v.Outcome == OutcomeTimedOut && v.Reason == "" || errors.Is(err, context.Canceled)):
			// The call ended before its hold did, no one having decided:
			// the client cancelled it (notifications/cancelled, as a
			// client does when its own request timeout passes) or went
			// away. No one was too slow; the call was given up.
			verdict = "cancelled"
		case err == nil && v.Outcome == OutcomeTimedOut:
			verdict = "timeout"
		case err == nil && v.Outcome == OutcomeDuplicate:
			verdict = "duplicate"
		case err == nil && v.Outcome == OutcomeNotRun:
			verdict = "not_run"
		case err == nil:
			verdict = "denied"
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			verdict = "timeout"
		}
		cancel()
	}
	traceVerdict(ctx, verdict)
	if lerr := g.cfg.Log.Log(&Record{Time: g.now(), Principal: principal, Server: a.u.name, Kind: table.Tool, Name: a.tool, Op: OpApproval,
		Decision: d, Verdict: verdict, Request: v.RequestID, TableDigest: a.table.Digest(), TableSerial: a.table.Serial()}); lerr != nil {
		g.obs.logWritten(lerr)
		g.logger.Error("decision log write failed", "error", lerr.Error())
		return nil, nil, errLogFailed
	}
	switch verdict {
	case "approved":
		return canon, nil, nil
	case "pending":
		var schema any
		if t := a.st.cat.toolIdx[a.tool]; t != nil {
			schema = t.OutputSchema
		}
		return nil, checkpoint(name, d.ApprovalChannel, v, schema != nil), nil
	}
	return nil, toolError(heldText(name, verdict, timeout, v, err)), nil
}

// dontRouteAround ends every answer to a held call that did not run: the
// agent must not treat a human's "no" as an obstacle to work around.
const dontRouteAround = "Do not retry it, not with other arguments either, and do not try to reach the same effect another way"

// heldText is what the agent is told about a held call that did not run.
func heldText(name, verdict string, timeout time.Duration, v Verdict, err error) string {
	req := ""
	if v.RequestID != "" {
		req = " (approval request " + v.RequestID + ")"
	}
	switch verdict {
	case "denied":
		who := "a human"
		if v.By != "" {
			who = v.By
		}
		why := ""
		if v.Reason != "" {
			why = ", saying: " + v.Reason
		}
		return fmt.Sprintf("policyc gateway: the call to %s was held for a human's approval%s and %s denied it%s. It did not run. %s; tell the user it was denied.", name, req, who, why, dontRouteAround)
	case "timeout":
		if v.Reason != "" && v.Retry {
			return fmt.Sprintf("policyc gateway: the call to %s was held for a human's approval%s, and the hold ended before anyone decided: %s. It did not run; the request stays pending on the other gateways sharing its state. Reconnect and repeat the call once, with the same arguments: it joins the request, or runs if the request was approved. Do not try to reach the same effect another way.", name, req, v.Reason)
		}
		if v.Reason != "" {
			return fmt.Sprintf("policyc gateway: the call to %s was held for a human's approval%s, and the hold ended before anyone decided: %s. It did not run. %s; tell the user.", name, req, v.Reason, dontRouteAround)
		}
		if v.RequestID == "" {
			return fmt.Sprintf("policyc gateway: the call to %s was held for a human's approval and no one decided within %s, so it did not run. %s; ask the user to have it approved.", name, timeout, dontRouteAround)
		}
		ask := "tell the user that approval request " + v.RequestID + " was not decided in time"
		if v.URL != "" {
			ask += " (" + v.URL + ")"
		}
		// The request's time, not the call's: a call that joined a
		// pending request waited only for what was left of it.
		return fmt.Sprintf("policyc gateway: the call to %s was held for a human's approval%s and no one decided before the request expired, %s after it was made, so it did not run. %s; %s.", name, req, timeout, dontRouteAround, ask)
	case "duplicate":
		return fmt.Sprintf("policyc gateway: the call to %s was identical to another call held for the same approval%s, which was approved once: that call ran, and this one did not. Do not retry it: the approved call has run once already.", name, req)
	case "cancelled":
		return fmt.Sprintf("policyc gateway: the call to %s was held for a human's approval%s and was cancelled before anyone decided, so it did not run; the request stays pending until it expires. %s; tell the user.", name, req, dontRouteAround)
	case "refused":
		return fmt.Sprintf("policyc gateway: the call to %s needs a human's approval and no request was made: %s. It did not run. %s; tell the user.", name, v.Reason, dontRouteAround)
	case "ended":
		return fmt.Sprintf("policyc gateway: the call to %s was held for a human's approval%s and its session ended before anyone decided, so it did not run. %s; tell the user.", name, req, dontRouteAround)
	case "not_run":
		why := ""
		if v.Reason != "" {
			why = ": " + v.Reason
		}
		return fmt.Sprintf("policyc gateway: the call to %s was approved%s but did not run%s. %s; tell the user.", name, req, why, dontRouteAround)
	}
	if errors.Is(err, ErrUnavailable) {
		return fmt.Sprintf("policyc gateway: the call to %s needs a human's approval, which cannot be asked for now (%v), so it did not run. You may repeat it later, with the same arguments; do not try to reach the same effect another way, and tell the user if it keeps failing.", name, err)
	}
	return fmt.Sprintf("policyc gateway: the call to %s needs a human's approval, which could not be obtained (%v), so it did not run. %s; tell the user.", name, err, dontRouteAround)
}

// reservedMeta is the _meta namespace the protocol reserves: per-session
// values (protocol version, client and server identity) that belong to one
// hop and are never passed to the next.
const reservedMeta = "io.modelcontextprotocol/"

// forwardMeta returns the _meta to send to upstream u for a client
// request: the client's own keys, without reserved ones, with the progress
// token replaced by one the gateway hands out (client tokens are only
// unique per session). The token is random and good for progress from u
// only, so that no other upstream can write into the call. done forgets
// the token.
func (g *Gateway) forwardMeta(meta mcp.Meta, ss *mcp.ServerSession, u *upstream) (mcp.Meta, func()) {
	if len(meta) == 0 {
		return nil, func() {}
	}
	out := make(mcp.Meta, len(meta))
	for k, v := range meta {
		if !strings.HasPrefix(k, reservedMeta) && k != "progressToken" {
			out[k] = v
		}
	}
	done := func() {}
	if tok, ok := meta["progressToken"]; ok && tok != nil && ss != nil {
		gt := "policyc-" + rand.Text()
		g.progress.Store(gt, progressTarget{session: ss, token: tok, upstream: u})
		out["progressToken"] = gt
		// Notifications are handled on the upstream connection's queue
		// while the response is handed over at once, so the last progress
		// can arrive just after the call returns: forget the token a
		// little later.
		done = func() { time.AfterFunc(progressGrace, func() { g.progress.Delete(gt) }) }
	}
	if len(out) == 0 {
		out = nil
	}
	return out, done
}

// progressGrace is how long a progress token outlives its call.
const progressGrace = 5 * time.Second

// stripMeta drops the reserved keys of an upstream result's _meta, the
// upstream's identity among them: clients see the gateway only.
func stripMeta(m mcp.Meta) mcp.Meta {
	for k := range m {
		if strings.HasPrefix(k, reservedMeta) {
			delete(m, k)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func (g *Gateway) listPrompts(ctx context.Context, principal string, r *mcp.ListPromptsRequest) (mcp.Result, error) {
	if r.Params != nil {
		if err := noCursor(r.Params.Cursor); err != nil {
			return nil, err
		}
	}
	prompts, err := g.prompts(g.listing(ctx, principal, methodListPrompts))
	if err != nil {
		return nil, err
	}
	return &mcp.ListPromptsResult{Cacheable: private, Prompts: prompts}, nil
}

// prompts is the prompts listing of ls's principal.
func (g *Gateway) prompts(ls *listing) ([]*mcp.Prompt, error) {
	// A prompt is never held: one on approval is not listed.
	return listNamed(ls, table.Prompt, table.Allow,
		func(c *catalogue) []*mcp.Prompt { return c.prompts }, func(p *mcp.Prompt) string { return p.Name },
		func(u *upstream, p *mcp.Prompt) *mcp.Prompt {
			c := *p
			c.Name = Join(u.name, p.Name)
			c.Meta = ls.listedMeta(u.name, p.Meta)
			return &c
		})
}

func (g *Gateway) getPrompt(ctx context.Context, principal string, r *mcp.GetPromptRequest) (mcp.Result, error) {
	name := r.Params.Name
	server, prompt := splitAsked(name)
	t := g.table.Load()
	d, err := g.decide(t, principal, server, table.Prompt, prompt, OpGet)
	if g.tracer != nil {
		traceDecision(ctx, t, server, prompt, d)
	}
	if err != nil {
		return nil, err
	}
	u := g.byName[server]
	if d.Effect != table.Allow || u == nil {
		return nil, absent(methodGetPrompt, name)
	}
	st := u.snapshot()
	if st.cat == nil || st.cat.promptIdx[prompt] == nil || g.pinsOf(t).hides(server, table.Prompt, prompt, st.cat) {
		return nil, absent(methodGetPrompt, name)
	}
	if st.session == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: u.unavailable(st).Error()}
	}
	meta, done := g.forwardMeta(r.Params.Meta, r.Session, u)
	defer done()
	meta = g.traceForward(ctx, meta)
	cctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	res, err := st.session.GetPrompt(cctx, &mcp.GetPromptParams{Name: prompt, Arguments: r.Params.Arguments, Meta: meta})
	g.traceUpstream(ctx, err)
	if err != nil {
		if we, ok := upstreamAnswer(err); ok {
			return nil, we
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: u.callError(cctx, st, methodGetPrompt, err).Error()}
	}
	res.Meta = stripMeta(res.Meta)
	return res, nil
}

// route returns the upstream a resources/read of uri goes to: the first
// that listed the URI, else the first whose template expands to it. A down
// upstream keeps its last listing, so its URIs are "unavailable", not
// unknown.
func (g *Gateway) route(uri string) (*upstream, *upState) {
	for _, u := range g.ups {
		if st := u.snapshot(); st.cat != nil && st.cat.resourceIdx[uri] != nil {
			return u, st
		}
	}
	for _, u := range g.ups {
		if st := u.snapshot(); st.cat.routes(uri) {
			return u, st
		}
	}
	return nil, nil
}

func (g *Gateway) listResources(ctx context.Context, principal string, r *mcp.ListResourcesRequest) (mcp.Result, error) {
	if r.Params != nil {
		if err := noCursor(r.Params.Cursor); err != nil {
			return nil, err
		}
	}
	rs, err := g.resources(g.listing(ctx, principal, methodListResources))
	if err != nil {
		return nil, err
	}
	return &mcp.ListResourcesResult{Cacheable: private, Resources: rs}, nil
}

// resources is the resources listing of ls's principal.
func (g *Gateway) resources(ls *listing) ([]*mcp.Resource, error) {
	return listByURI(ls, func(c *catalogue) []*mcp.Resource { return c.resources },
		func(r *mcp.Resource) string { return r.URI },
		func(server string, r *mcp.Resource) *mcp.Resource {
			c := *r
			c.Meta = ls.listedMeta(server, r.Meta)
			return &c
		})
}

// listTemplates lists resource templates. A template is decided by its
// URI template text as the resource name: the listing shows a template when
// the table allows that text (a glob like "repo://acme/*" allows
// "repo://acme/{name}"). A read is always decided on the concrete URI.
func (g *Gateway) listTemplates(ctx context.Context, principal string, r *mcp.ListResourceTemplatesRequest) (mcp.Result, error) {
	if r.Params != nil {
		if err := noCursor(r.Params.Cursor); err != nil {
			return nil, err
		}
	}
	ts, err := g.templates(g.listing(ctx, principal, methodListTemplates))
	if err != nil {
		return nil, err
	}
	return &mcp.ListResourceTemplatesResult{Cacheable: private, ResourceTemplates: ts}, nil
}

// templates is the resource templates listing of ls's principal.
func (g *Gateway) templates(ls *listing) ([]*mcp.ResourceTemplate, error) {
	return listByURI(ls, func(c *catalogue) []*mcp.ResourceTemplate { return c.templates },
		func(t *mcp.ResourceTemplate) string { return t.URITemplate },
		func(server string, t *mcp.ResourceTemplate) *mcp.ResourceTemplate {
			c := *t
			c.Meta = ls.listedMeta(server, t.Meta)
			return &c
		})
}

// listByURI lists the resources (or templates) of every upstream that the
// table allows ls's principal to see, as the copies copyAs makes of them. A URI
// belongs to the first upstream that lists it, as in route, even while that
// upstream is down.
func listByURI[T any](ls *listing, items func(*catalogue) []T, uri func(T) string, copyAs func(string, T) T) ([]T, error) {
	g := ls.g
	out := []T{}
	seen := map[string]bool{}
	for _, u := range g.ups {
		st := u.snapshot()
		if st.cat == nil {
			continue
		}
		for _, it := range items(st.cat) {
			name := uri(it)
			if seen[name] {
				continue
			}
			seen[name] = true
			if st.session == nil {
				continue
			}
			d := ls.decide(u.name, table.Resource, name, OpList)
			if d.Effect != table.Allow || d.Consent && g.cfg.Consent == nil {
				ls.hide(u.name, table.Resource, OpList, name)
				continue
			}
			out = append(out, copyAs(u.name, it))
		}
	}
	if err := ls.log(); err != nil {
		return nil, err
	}
	return out, nil
}

func (g *Gateway) readResource(ctx context.Context, principal string, r *mcp.ReadResourceRequest) (mcp.Result, error) {
	uri := r.Params.URI
	u, st := g.route(uri)
	server := ""
	if u != nil {
		server = u.name
	}
	t := g.table.Load()
	d, err := g.decide(t, principal, server, table.Resource, uri, OpRead)
	if g.tracer != nil {
		traceDecision(ctx, t, server, uri, d)
	}
	if err != nil {
		return nil, err
	}
	if d.Effect != table.Allow || u == nil {
		return nil, absent(methodReadResource, uri)
	}
	if d.Consent {
		// ui:// (SEP-1865): only with the principal's consent; without a
		// consent gate there is none, and the resource stays denied.
		if g.cfg.Consent == nil {
			return nil, absent(methodReadResource, uri)
		}
		creq := &ConsentRequest{Principal: principal, Server: u.name, URI: uri, Channel: d.ConsentChannel, TableDigest: t.Digest(), TableSerial: t.Serial()}
		if r.Session != nil {
			creq.Session = r.Session.ID()
		}
		if ci := r.ClientInfo(); ci != nil {
			creq.Client = strings.TrimSpace(ci.Name + " " + ci.Version)
		}
		ok, err := g.cfg.Consent.Consent(ctx, creq)
		if err != nil || !ok {
			return nil, absent(methodReadResource, uri)
		}
	}
	if st.session == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: u.unavailable(st).Error()}
	}
	meta, done := g.forwardMeta(r.Params.Meta, r.Session, u)
	defer done()
	meta = g.traceForward(ctx, meta)
	cctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	res, err := st.session.ReadResource(cctx, &mcp.ReadResourceParams{URI: uri, Meta: meta})
	g.traceUpstream(ctx, err)
	if err != nil {
		if we, ok := upstreamAnswer(err); ok {
			if we.Code == jsonrpc.CodeInvalidParams || we.Code == codeLegacyResourceNotFound {
				// The uri is the only parameter: the upstream has no such
				// resource. Say so in the gateway's own words, the same as
				// for any other absent or denied URI.
				return nil, absent(methodReadResource, uri)
			}
			return nil, we
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: u.callError(cctx, st, methodReadResource, err).Error()}
	}
	res.Meta = stripMeta(res.Meta)
	res.Cacheable = private
	return res, nil
}
