package approval

import (
	"context"
	"strings"

	"github.com/policyc/policyc/runtime/gateway"
)

// Approvals returns the gate as the gateway's ApprovalGate.
func (g *Gate) Approvals() gateway.ApprovalGate { return approvals{g} }

// Consents returns the gate as the gateway's ConsentGate.
func (g *Gate) Consents() gateway.ConsentGate { return consents{g} }

type approvals struct{ g *Gate }

func (a approvals) Hold(ctx context.Context, req *gateway.HoldRequest) (gateway.Verdict, error) {
	o, err := a.g.HoldCall(ctx, &Call{
		Principal: req.Principal, Server: req.Server, Tool: req.Tool, Arguments: req.Arguments,
		Origin: req.Origin, Timeout: req.Timeout, HoldFor: req.HoldFor, Channel: Channel{Name: req.Channel},
		Client: req.Client, Session: req.Session, TableSerial: req.TableSerial, TableDigest: req.TableDigest,
		Progress: req.Progress, Recheck: req.Recheck,
	})
	if err != nil {
		return gateway.Verdict{}, err
	}
	v := gateway.Verdict{RequestID: o.RequestID, URL: o.URL, By: o.By, Reason: o.Reason, Expires: o.Expires}
	switch o.Answer {
	case AnswerRun:
		v.Approved = true
	case AnswerDenied:
		v.Outcome = gateway.OutcomeDenied
	case AnswerTimedOut:
		v.Outcome = gateway.OutcomeTimedOut
		if o.Reason != gatewayStopped {
			// A timeout, however it was reached: the gateway says so in
			// its own words. Only a stop is told as such.
			v.Reason = ""
		}
		// A stopped replica's request stays pending in the shared
		// store: the agent's retry on another replica joins it.
		v.Retry = v.Reason != "" && a.g.pg != nil
	case AnswerDuplicate:
		v.Outcome = gateway.OutcomeDuplicate
	case AnswerPending:
		v.Outcome = gateway.OutcomePending
	case AnswerRefused:
		v.Outcome = gateway.OutcomeRefused
	default:
		v.Outcome = gateway.OutcomeNotRun
	}
	return v, nil
}

// Await waits for principal's request id, for the gateway's wait tool.
func (a approvals) Await(ctx context.Context, principal, id string) (gateway.RequestState, bool) {
	r, ok := a.g.Await(ctx, principal, id)
	if !ok {
		return gateway.RequestState{}, false
	}
	return a.state(r), true
}

// Pending lists principal's pending requests, for the gateway's wait tool.
func (a approvals) Pending(principal string) []gateway.RequestState {
	var out []gateway.RequestState
	for _, r := range a.g.PendingOf(principal) {
		out = append(out, a.state(r))
	}
	return out
}

func (a approvals) state(r Request) gateway.RequestState {
	st := gateway.RequestState{ID: r.ID, Status: string(r.Status), Server: r.Server, Tool: r.Tool, Channel: r.Channel, URL: a.g.Link(r.ID), Expires: r.Expires}
	if d := r.Decision; d != nil {
		st.By, st.Reason, st.For = d.By, d.Reason, d.For
		if d.For == ForOnce && r.Status == Approved {
			switch {
			case r.Ran == "ran":
				st.Used = true
			case r.Ran != "":
				// Lapsed unused, or could not run: over, as an expiry is.
				st.Status, st.Reason = string(Expired), strings.TrimPrefix(r.Ran, "not run: ")
			}
		}
	}
	return st
}

type consents struct{ g *Gate }

func (c consents) Consent(ctx context.Context, req *gateway.ConsentRequest) (bool, error) {
	ok, _, err := c.g.Consent(ctx, &ConsentCall{
		Principal: req.Principal, Server: req.Server, URI: req.URI, Channel: Channel{Name: req.Channel},
		Client: req.Client, Session: req.Session, TableSerial: req.TableSerial, TableDigest: req.TableDigest,
	})
	return ok, err
}
