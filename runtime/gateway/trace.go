package gateway

import (
	"context"
	"reflect"
	"strconv"

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
	attrKind         = attribute.Key("policyc.kind")
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
)

// traceMiddleware starts a span for every MCP request a client sends,
// the child of the trace context in the request's _meta when it carries
// one. The handlers add the decision to it (traceDecision).
func (g *Gateway) traceMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if meta := requestMeta(req); meta != nil {
			ctx = traceContext.Extract(ctx, metaCarrier(meta))
		}
		ctx, span := g.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrMethod.String(method)))
		defer span.End()
		if s, ok := req.GetSession().(*mcp.ServerSession); ok && s != nil && s.ID() != "" {
			span.SetAttributes(attrSession.String(s.ID()))
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

// traceDecision adds decision d about (server, kind, name) by table t to
// the request's span.
func traceDecision(ctx context.Context, t *decide.Table, server string, kind table.Kind, name string, d decide.Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrServer.String(server), attrKind.String(kind.String()), attrName.String(name),
		attrDecision.String(d.Effect.String()), attrReason.String(d.Reason.String()), attrOrigin.String(d.Origin),
		attrTableDigest.String(t.Digest()), attrTableSerial.String(strconv.FormatUint(t.Serial(), 10)))
}

// traceListing adds a listing's counts by decision to the request's span.
func traceListing(ctx context.Context, t *decide.Table, counts [3]int) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrListAllow.Int(counts[table.Allow]), attrListApprove.Int(counts[table.Approve]), attrListDeny.Int(counts[table.Deny]),
		attrTableDigest.String(t.Digest()), attrTableSerial.String(strconv.FormatUint(t.Serial(), 10)))
}

// traceVerdict adds a held call's verdict to the request's span.
func traceVerdict(ctx context.Context, verdict string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrVerdict.String(verdict))
	}
}

// upstreamSpan starts the span of a request forwarded to upstream server,
// when the client's request has a span, and returns meta (the forwarded
// _meta) with that span's trace context in it: the upstream's own spans
// join the client's trace. meta may be replaced, never modified in place
// unless the gateway made it (forwardMeta copies the client's). end ends
// the span with the call's error, if any.
func (g *Gateway) upstreamSpan(ctx context.Context, method, server, name string, meta mcp.Meta) (context.Context, mcp.Meta, func(error)) {
	if g.tracer == nil || !trace.SpanFromContext(ctx).SpanContext().IsValid() {
		return ctx, meta, func(error) {}
	}
	ctx, span := g.tracer.Start(ctx, method+" "+server, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrMethod.String(method), attrServer.String(server), attrName.String(name)))
	if meta == nil {
		meta = mcp.Meta{}
	}
	traceContext.Inject(ctx, metaCarrier(meta))
	return ctx, meta, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
