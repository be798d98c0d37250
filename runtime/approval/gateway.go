package approval

import (
	"context"

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
	v := gateway.Verdict{RequestID: o.RequestID, URL: o.URL, By: o.By, Reason: o.Reason}
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
	case AnswerDuplicate:
		v.Outcome = gateway.OutcomeDuplicate
	default:
		v.Outcome = gateway.OutcomeNotRun
	}
	return v, nil
}

type consents struct{ g *Gate }

func (c consents) Consent(ctx context.Context, req *gateway.ConsentRequest) (bool, error) {
	ok, _, err := c.g.Consent(ctx, &ConsentCall{
		Principal: req.Principal, Server: req.Server, URI: req.URI, Channel: Channel{Name: req.Channel},
		Client: req.Client, Session: req.Session, TableSerial: req.TableSerial, TableDigest: req.TableDigest,
	})
	return ok, err
}
