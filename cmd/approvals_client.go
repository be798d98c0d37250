package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"

	"github.com/policyc/policyc/internal/termsafe"
	"github.com/policyc/policyc/runtime/approval"
)

// call makes one admin API call and decodes the answer into out.
func (o *approvalsOptions) call(c *cobra.Command, method, path string, body, out any) error {
	base := o.admin
	if base == "" {
		base = os.Getenv("POLICYC_ADMIN_URL")
	}
	if base == "" {
		return usageErrorf("--admin URL is required: the gateway's admin listener (or set POLICYC_ADMIN_URL)")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErrorf("--admin %q is not an http or https URL", base)
	}
	if o.tokenEnv == "" {
		return usageErrorf("--token-env must name an environment variable")
	}
	token := os.Getenv(o.tokenEnv)
	if token == "" {
		return usageErrorf("%s is not set: put an approver token in it, or name another variable with --token-env", o.tokenEnv)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return failuref("%v", err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(c.Context(), o.timeout)
	defer cancel()
	endpoint := strings.TrimSuffix(base, "/") + approval.APIPrefix + path
	req, err := http.NewRequestWithContext(ctx, method, endpoint, rd)
	if err != nil {
		return failuref("%v", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", "policyc-approvals")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return failuref("the admin API at %s: %v", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return failuref("the admin API at %s: %v", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e approval.ErrorBody
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			return failuref("the admin API at %s answered %s, not an admin API error: is --admin the admin listener (not the MCP front)?", base, resp.Status)
		}
		code := ExitRefused
		if resp.StatusCode >= 500 {
			code = ExitFailure
		}
		return withCode(code, fmt.Errorf("%s (%d)", termsafe.String(e.Error), resp.StatusCode))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return failuref("the admin API at %s answered something that is not JSON: %v", base, err)
	}
	return nil
}

// writeJSONOut prints v as JSON, the values as the admin API gave them,
// with what could steer a terminal written as \u escapes.
func writeJSONOut(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return failuref("%v", err)
	}
	_, err = w.Write(append(termsafe.JSON(b), '\n'))
	return err
}

// The text output prints requests through approval.Neutral, and other
// text the admin API answers through termsafe.String: an agent's control
// characters and BiDi overrides are shown as escapes, never obeyed.

// writeDecided prints the answer to approve, deny or revoke.
func writeDecided(w io.Writer, v approval.RequestView) {
	r := approval.Neutral(v.Request)
	fmt.Fprintf(w, "%s: %s\n", r.ID, outcome(r))
	writeHeldCalls(w, v.HeldCalls)
}

// what names the thing a request is about.
func what(r approval.Request) string {
	if r.Kind == approval.KindConsent {
		return "consent " + r.URI
	}
	return r.Server + " / " + r.Tool
}

// outcome says where a request stands, in one line.
func outcome(r approval.Request) string {
	d := r.Decision
	switch r.Status {
	case approval.Pending:
		return "pending until " + stamp(r.Expires)
	case approval.Expired:
		return "expired: " + r.End
	case approval.Denied:
		s := "denied by " + d.By
		if d.Reason != "" {
			s += " (" + d.Reason + ")"
		}
		return s
	}
	s := "approved " + d.For + " by " + d.By
	switch {
	case d.Revoked != nil:
		s += ", revoked by " + d.Revoked.By + " at " + stamp(d.Revoked.At)
	case !d.Until.IsZero():
		s += ", until " + stamp(d.Until)
	}
	if r.Ran != "" {
		s += "; " + r.Ran
	}
	return s
}

// writeHeldCalls says what became of the calls held for a request that
// was just decided: an approval is not a call that ran (a reload may have
// denied it meanwhile).
func writeHeldCalls(w io.Writer, calls []approval.HeldCall) {
	for _, c := range calls {
		what := "held calls"
		if c.Count == 1 {
			what = "held call"
		}
		answer := map[string]string{"run": "ran", "pending": "not answered yet"}[c.Answer]
		if answer == "" {
			answer = termsafe.String(c.Answer)
		}
		if c.Reason != "" {
			answer += ": " + termsafe.String(c.Reason)
		}
		fmt.Fprintf(w, "  %d %s: %s\n", c.Count, what, answer)
	}
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

func writeRequestTable(w io.Writer, reqs []approval.RequestView, status string, active bool) error {
	if len(reqs) == 0 {
		switch {
		case active:
			fmt.Fprintln(w, "No remembered approval is in force.")
		case status == "all":
			fmt.Fprintln(w, "No approval requests.")
		default:
			fmt.Fprintf(w, "No %s approval requests.\n", status)
		}
		return nil
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
	t.Header("Request", "Principal", "What", "Asked", "Status")
	for _, v := range reqs {
		r := approval.Neutral(v.Request)
		st := outcome(r)
		if r.Status == approval.Pending && v.Waiting > 1 {
			st += fmt.Sprintf(" (%d calls waiting)", v.Waiting)
		}
		if err := t.Append(r.ID, r.Principal, what(r), stamp(r.Created), st); err != nil {
			return err
		}
	}
	return t.Render()
}

func writeRequest(w io.Writer, v approval.RequestView) {
	v.Request = approval.Neutral(v.Request)
	v.URL = termsafe.String(v.URL)
	for i, d := range v.Durations {
		v.Durations[i] = termsafe.String(d)
	}
	line := func(k, val string) {
		if val != "" {
			fmt.Fprintf(w, "%-12s %s\n", k+":", val)
		}
	}
	line("request", v.ID)
	line("status", outcome(v.Request))
	line("principal", v.Principal)
	agent := v.Client
	if v.Session != "" {
		agent += " (session " + v.Session + ")"
	}
	line("agent", strings.TrimSpace(agent))
	if v.Kind == approval.KindConsent {
		line("consent to", v.URI+" on "+v.Server)
	} else {
		line("tool", v.Server+" / "+v.Tool)
	}
	line("rule", v.Origin)
	line("channel", v.Channel)
	if dl := v.Delivery; dl != nil {
		s := dl.State
		if dl.Attempts > 0 {
			s += fmt.Sprintf(" after %d attempt(s)", dl.Attempts)
		}
		if dl.Error != "" {
			s += ": " + dl.Error
		}
		line("webhook", s)
	}
	line("asked", stamp(v.Created))
	if v.Calls > 1 {
		line("calls", fmt.Sprintf("%d identical calls folded into this request", v.Calls))
	}
	if v.Status == approval.Pending {
		line("waiting", fmt.Sprintf("%d call(s)", v.Waiting))
		line("may give", strings.Join(v.Durations, ", "))
	}
	if d := v.Decision; d != nil {
		line("decided", stamp(d.At)+" from "+d.From)
	}
	switch {
	case v.Kind == approval.KindConsent:
	case v.PreviewOff:
		fmt.Fprintln(w, "preview:     off for this server (the tool name only)")
	case v.Preview != nil:
		fmt.Fprintln(w, "preview:")
		for _, f := range v.Preview.Fields {
			fmt.Fprintf(w, "  %s: %s\n", f.Key, f.Value)
		}
		if v.Preview.Omitted > 0 {
			fmt.Fprintf(w, "  … and %d more key(s)\n", v.Preview.Omitted)
		}
		if v.Preview.Incomplete() {
			fmt.Fprintf(w, "  %s\n", approval.IncompleteNote)
		}
	}
	line("link", v.URL)
}
