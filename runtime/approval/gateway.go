package approval

import (
	"context"
	"fmt"

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
		Origin: req.Origin, Timeout: req.Timeout, Channel: Channel{Name: req.Channel},
		Client: req.Client, Session: req.Session, TableSerial: req.TableSerial, TableDigest: req.TableDigest,
		Progress: req.Progress, Recheck: req.Recheck,
	})
	if err != nil {
		return gateway.Verdict{}, err
	}
	switch o.Answer {
	case AnswerRun:
		return gateway.Verdict{Approved: true}, nil
	case AnswerDenied:
		why := "request " + o.RequestID + ", denied by " + o.By
		if o.Reason != "" {
			why += ": " + o.Reason
		}
		return gateway.Verdict{Reason: why}, nil
	case AnswerTimedOut:
		return gateway.Verdict{}, fmt.Errorf("request %s: %s: %w", o.RequestID, o.Reason, context.DeadlineExceeded)
	case AnswerDuplicate:
		return gateway.Verdict{Reason: "request " + o.RequestID + " was approved once, and an identical call held for it ran instead of this one"}, nil
	}
	return gateway.Verdict{Reason: "request " + o.RequestID + " was approved but did not run: " + o.Reason}, nil
}

type consents struct{ g *Gate }

func (c consents) Consent(ctx context.Context, req *gateway.ConsentRequest) (bool, error) {
	ok, _, err := c.g.Consent(ctx, &ConsentCall{
		Principal: req.Principal, Server: req.Server, URI: req.URI, Channel: Channel{Name: req.Channel}, TableDigest: req.TableDigest,
	})
	return ok, err
}
