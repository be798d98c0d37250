package gateway

import (
	"context"
	"reflect"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/policyc/policyc/runtime/gateway"

// traceContext reads and writes W3C trace context (traceparent,
// tracestate): the keys an MCP request's _meta carries it under.
var traceContext = propagation.TraceContext{}

// metaCarrier is an MCP _meta as a carrier of trace context.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// Span attributes the gateway sets, beside mcp.method.name.
const (
	attrServer       = attribute.Key("policyc.server")
	attrName         = attribute.Key("policyc.name")
	attrDecision     = attribute.Key("policyc.decision")
	attrReason       = attribute.Key("policyc.decision.reason")
	attrOrigin       = attribute.Key("policyc.decision.origin")
	attrTableDigest  = attribute.Key("policyc.table.digest")
	attrTableSerial  = attribute.Key("policyc.table.serial")
	attrVerdict      = attribute.Key("policyc.approval.verdict")
	attrListAllow    = attribute.Key("policyc.listing.allow")
	attrListApprove  = attribute.Key("policyc.listing.approve")
	attrListDeny     = attribute.Key("policyc.listing.deny")
	attrMethod       = attribute.Key("mcp.method.name")
	attrSession      = attribute.Key("mcp.session.id")
	attrRPCErrorCode = attribute.Key("rpc.jsonrpc.error_code")
	// attrUpstreamError is the error of a request forwarded upstream that
	// got no answer, or the upstream's JSON-RPC error.
	attrUpstreamError = attribute.Key("policyc.upstream.error")
)

// traceMiddleware starts a span for every MCP request a client sends (not
// for its notifications),
// the child of the trace context in the request's _meta when it carries
// one. The handlers add the decision to it (traceDecision).
func (g *Gateway) traceMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req) // not a request: nothing answers it
		}
		if meta := requestMeta(req); meta != nil {
			ctx = traceContext.Extract(ctx, metaCarrier(meta))
		}
		ctx, span := g.tracer.Start(ctx, method, serverSpan)
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(methodAttr(method)...)
			if s, ok := req.GetSession().(*mcp.ServerSession); ok && s != nil && s.ID() != "" {
				span.SetAttributes(attrSession.String(s.ID()))
			}
		}
		res, err := next(ctx, method, req)
		switch r := res.(type) {
		case *mcp.CallToolResult:
			if r != nil && r.IsError {
				span.SetStatus(codes.Error, "tool execution error")
			}
		}
		if err != nil {
			if we, ok := err.(*jsonrpc.Error); ok {
				span.SetAttributes(attrRPCErrorCode.Int64(we.Code))
			}
			span.SetStatus(codes.Error, err.Error())
		}
		return res, err
	}
}

// serverSpan is the option of a request's span, made once.
var serverSpan = trace.WithSpanKind(trace.SpanKindServer)

// methodAttrs holds the mcp.method.name attribute of each method the
// gateway answers itself, made once: a slice passed through the
// trace.Span interface escapes, so one built per request would be
// allocated. The methods the SDK answers get one per request.
var methodAttrs = func() map[string][]attribute.KeyValue {
	m := map[string][]attribute.KeyValue{}
	for _, method := range []string{methodListTools, methodCallTool, methodListPrompts, methodGetPrompt,
		methodListResources, methodListTemplates, methodReadResource} {
		m[method] = []attribute.KeyValue{attrMethod.String(method)}
	}
	return m
}()

// methodAttr is the mcp.method.name attribute of method, as a slice of one.
func methodAttr(method string) []attribute.KeyValue {
	if a, ok := methodAttrs[method]; ok {
		return a
	}
	return []attribute.KeyValue{attrMethod.String(method)}
}

// decisionAttrs recycles traceDecision's attributes. The SDK's
// SetAttributes copies what it is given, as a variadic callee keeps none
// of its arguments, but the compiler cannot see that through the
// trace.Span interface and would allocate them on every request.
var decisionAttrs = sync.Pool{New: func() any { return new([7]attribute.KeyValue) }}

// requestMeta is the _meta of req's params, nil when it has none.
func requestMeta(req mcp.Request) map[string]any {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p.GetMeta()
}

// traceDecision adds decision d about the item name of server by table t
// to the request's span. The item's kind is the request's method's
// (mcp.method.name), not an attribute of its own: that keeps an allowed
// call's span without a session (stdio, HTTP at 2026-07-28) at 8
// attributes, under the map table the SDK (v1.47.0) allocates at the end
// of a span of 9 (BenchmarkOTelSpan; TestOTelSpanAttributeMap). A span of
// a session (mcp.session.id) or of a held call has 9 or more regardless.
func traceDecision(ctx context.Context, t *decide.Table, server string, name string, d decide.Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	a := decisionAttrs.Get().(*[7]attribute.KeyValue)
	*a = [...]attribute.KeyValue{attrServer.String(server), attrName.String(name),
		attrDecision.String(d.Effect.String()), attrReason.String(d.Reason.String()), attrOrigin.String(d.Origin),
		attrTableDigest.String(t.Digest()), attrTableSerial.Int64(int64(t.Serial()))}
	span.SetAttributes(a[:]...)
	*a = [7]attribute.KeyValue{} // keep no names alive in the pool
	decisionAttrs.Put(a)
}

// traceListing adds a listing's counts by decision to the request's span.
func traceListing(ctx context.Context, t *decide.Table, counts [3]int) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrListAllow.Int(counts[table.Allow]), attrListApprove.Int(counts[table.Approve]), attrListDeny.Int(counts[table.Deny]),
		attrTableDigest.String(t.Digest()), attrTableSerial.Int64(int64(t.Serial())))
}

// traceVerdict adds a held call's verdict to the request's span.
func traceVerdict(ctx context.Context, verdict string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrVerdict.String(verdict))
	}
}

// traceForward passes the request's trace context on in meta, the _meta
// of a request forwarded upstream, when the client's request has a span:
// the upstream's own spans join the client's trace as children of the
// gateway's span. It returns meta (forwardMeta's copy of the client's)
// with traceparent and tracestate set, or a new one.
func (g *Gateway) traceForward(ctx context.Context, meta mcp.Meta) mcp.Meta {
	if g.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	traceContext.Inject(ctx, metaCarrier(meta))
	return meta
}

// traceUpstream records on the request's span the error, if any, of the
// request traceForward passed upstream.
func (g *Gateway) traceUpstream(ctx context.Context, err error) {
	if err == nil || g.tracer == nil {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrUpstreamError.String(err.Error()))
	}
}
