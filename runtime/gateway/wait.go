package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/policyc/policyc/runtime/principal"
)

// WaitToolName is the gateway's own tool: an agent whose held call was
// answered with a checkpoint calls it to wait for the human's decision.
// Its server part is reserved: no upstream may be named ReservedServer.
const WaitToolName = ReservedServer + Separator + "wait_for_approval"

// ReservedServer is the server part of the gateway's own tool names.
const ReservedServer = "policyc"

// ApprovalWaiter is what an ApprovalGate offers for the wait tool: a
// principal's own requests, and waiting for one of them.
type ApprovalWaiter interface {
	// Await waits until principal's request id is decided or expires, or
	// ctx ends, and returns where it stands. ok is false for an unknown
	// request and for another principal's, alike.
	Await(ctx context.Context, principal, id string) (st RequestState, ok bool)
	// Pending lists principal's pending requests.
	Pending(principal string) []RequestState
}

// RequestState is where one approval request stands, as the wait tool
// tells its principal.
type RequestState struct {
	ID string `json:"request_id"`
	// Status is "pending", "approved", "denied" or "expired".
	Status string `json:"status"`
	// Server and Tool are the upstream's names.
	Server string `json:"-"`
	Tool   string `json:"-"`
	// Name is the tool's name as the client calls it.
	Name string `json:"tool"`
	// For is an approval's extent: "once", "1h", ...; Used is set when an
	// approval once was used already.
	For  string `json:"for,omitempty"`
	Used bool   `json:"used,omitempty"`
	// By is who decided; Reason why, as the approver said.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Channel names the approvers; URL links to the request.
	Channel string    `json:"approvers,omitempty"`
	URL     string    `json:"url,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
}

// HoldOptions say how long a held call waits in place. A host gives up on
// a tool call after its own timeout (60 s for hosts built on the MCP
// TypeScript SDK), so the default answers before that; a request itself
// lives approval_timeout_seconds.
type HoldOptions struct {
	// InPlace is how long a call is held. Default DefaultHoldInPlace.
	InPlace time.Duration
	// WithProgress is how long a call whose client asked for progress is
	// held (told at a steady interval that it still waits, which resets
	// the timeout of hosts that count progress). Zero holds it as long as
	// its request lives.
	WithProgress time.Duration
	// Principals and Clients override InPlace for a principal, and for a
	// client by the name it gives (its clientInfo name); a principal's
	// comes first.
	Principals, Clients map[string]time.Duration
}

// DefaultHoldInPlace is HoldOptions.InPlace when unset: under the 60 s
// that hosts built on the MCP TypeScript SDK wait for a result.
const DefaultHoldInPlace = 50 * time.Second

// holdFor is how long a call of principal from client is held in place;
// progress is set when the client asked for progress. Zero means as long
// as the request lives.
func (o HoldOptions) holdFor(ref, client string, progress bool) time.Duration {
	if d, ok := o.Principals[principal.Name(ref)]; ok {
		return d
	}
	if d, ok := o.Clients[client]; ok {
		return d
	}
	if progress {
		return o.WithProgress
	}
	if o.InPlace > 0 {
		return o.InPlace
	}
	return DefaultHoldInPlace
}

// waitTool is the wait tool as listed.
var waitTool = &mcp.Tool{
	Name:  WaitToolName,
	Title: "Wait for a human's approval",
	Description: "Waits for a human's decision on one of your approval requests. When a tool call answers that it " +
		"is waiting for approval, call this tool with its request_id: it answers when the request is decided, or " +
		"after a while with its status still pending (then call it again). Once it says approved, repeat the " +
		"original call exactly once, with the same arguments. Without request_id it lists your pending requests.",
	InputSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"request_id": map[string]any{"type": "string", "description": "the approval request's id (apr-...), as the held call's answer gave it"},
		},
		"additionalProperties": false,
	},
	Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)},
}

// waiter is the approval gate as an ApprovalWaiter, nil when it is not one.
func (g *Gateway) waiter() ApprovalWaiter {
	w, _ := g.cfg.Approvals.(ApprovalWaiter)
	return w
}

// callWaitTool answers a call of the wait tool by principal.
func (g *Gateway) callWaitTool(ctx context.Context, principal string, r *mcp.CallToolRequest, args json.RawMessage) (mcp.Result, error) {
	w := g.waiter()
	if w == nil {
		return nil, absent(methodCallTool, r.Params.Name)
	}
	var in struct {
		RequestID *string `json:"request_id"`
	}
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: the arguments are {\"request_id\": \"apr-...\"} or none (%v)", WaitToolName, err)}
	}
	if in.RequestID == nil {
		list := w.Pending(principal)
		for i := range list {
			list[i].Name = Join(list[i].Server, list[i].Tool)
		}
		text := fmt.Sprintf("policyc gateway: you have %d approval requests pending.", len(list))
		for _, st := range list {
			text += fmt.Sprintf(" %s: %s, expires %s.", st.ID, st.Name, st.Expires.UTC().Format(time.RFC3339))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: map[string]any{"pending": list}}, nil
	}
	id := *in.RequestID
	hold := g.cfg.Holds.holdFor(principal, clientName(r), r.Params.GetProgressToken() != nil)
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if hold > 0 {
		wctx, cancel = context.WithTimeout(ctx, hold)
	}
	defer cancel()
	st, ok := w.Await(wctx, principal, id)
	if !ok {
		return toolError(fmt.Sprintf("policyc gateway: there is no approval request %q of yours. Call %s without arguments to list your pending requests.", id, WaitToolName)), nil
	}
	st.Name = Join(st.Server, st.Tool)
	res := &mcp.CallToolResult{StructuredContent: st}
	var text string
	switch st.Status {
	case "pending":
		text = fmt.Sprintf("policyc gateway: approval request %s (%s) is still pending with the approvers %q; it expires at %s. Call %s with {\"request_id\":%q} again to go on waiting. %s.",
			id, st.Name, st.Channel, st.Expires.UTC().Format(time.RFC3339), WaitToolName, id, dontRouteAroundPending)
		res.IsError = true
	case "approved":
		switch {
		case st.Used:
			text = fmt.Sprintf("policyc gateway: approval request %s (%s) was approved once by %s, and a call used the approval already. Do not repeat the call.", id, st.Name, st.By)
		case st.For == "once" || st.For == "":
			text = fmt.Sprintf("policyc gateway: approval request %s was approved once by %s: now repeat the original call to %s exactly once, with the same arguments.", id, st.By, st.Name)
		default:
			text = fmt.Sprintf("policyc gateway: approval request %s was approved by %s for %s: now repeat the original call to %s, with the same arguments.", id, st.By, st.For, st.Name)
		}
	case "denied":
		why := ""
		if st.Reason != "" {
			why = ", saying: " + st.Reason
		}
		text = fmt.Sprintf("policyc gateway: approval request %s (%s) was denied by %s%s. The call did not run. %s; tell the user it was denied.", id, st.Name, st.By, why, dontRouteAround)
		res.IsError = true
	default:
		res.IsError = true
		if st.By == "" {
			text = fmt.Sprintf("policyc gateway: approval request %s (%s) expired before anyone decided. The call did not run. %s; tell the user.", id, st.Name, dontRouteAround)
			break
		}
		// Approved once, and over unused: the approval lapsed (the
		// gateway stopped, or no call used it in time) or could not be
		// used.
		text = fmt.Sprintf("policyc gateway: approval request %s (%s) was approved once by %s, but the call did not run: %s. The approval is over: a repeat of the call is not covered by it and needs a new approval. Tell the user, and repeat the call only if they ask you to; do not try to reach the same effect another way.", id, st.Name, st.By, st.Reason)
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	return res, nil
}

// dontRouteAroundPending ends every answer that a request is pending.
const dontRouteAroundPending = "Do not try another tool or route to get the same effect, and do not repeat the call until the request is approved"

// checkpoint is the answer to a held call whose hold in place ended with
// its request pending: not a success and not a final denial, in words, in
// the result's _meta (under CheckpointMeta) and, unless the tool declares
// an output schema (outputSchema), in structuredContent. The TypeScript
// SDK's client checks structuredContent against the tool's output schema
// even in an error result, and would refuse the checkpoint.
func checkpoint(name, channel string, v Verdict, outputSchema bool) *mcp.CallToolResult {
	st := RequestState{ID: v.RequestID, Status: "pending", Name: name, Channel: channel, URL: v.URL, Expires: v.Expires}
	link := ""
	if v.URL != "" {
		link = ", " + v.URL
	}
	text := fmt.Sprintf("policyc gateway: the call to %s is waiting for a human's approval (approval request %s, approvers %q%s) and has not run. Call the tool %s with {\"request_id\":%q} to wait for the decision; when it says approved, repeat this call exactly once with the same arguments. The request expires at %s. %s.",
		name, v.RequestID, channel, link, WaitToolName, v.RequestID, v.Expires.UTC().Format(time.RFC3339), dontRouteAroundPending)
	status := map[string]any{"status": "pending", "request_id": st.ID, "url": st.URL, "wait_tool": WaitToolName, "approvers": channel, "expires": st.Expires.UTC().Format(time.RFC3339)}
	res := &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		Meta:    mcp.Meta{CheckpointMeta: status},
	}
	if !outputSchema {
		res.StructuredContent = status
	}
	return res
}

// CheckpointMeta is the _meta key of a checkpoint's status.
const CheckpointMeta = "dev.policyc/approval"

// clientName is the name the client of r gave, "" when none.
func clientName(r *mcp.CallToolRequest) string {
	if ci := r.ClientInfo(); ci != nil {
		return ci.Name
	}
	return ""
}

// DefaultRequestLife is how long an approval request lives when the table
// gives no approval_timeout_seconds.
const DefaultRequestLife = 900 * time.Second
