package cmd

import (
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/gateway/config"
)

// writeGatewayCheck prints what gateway --check found: the table, the
// upstreams, the front and the approval gate the gateway would run with.
func writeGatewayCheck(w io.Writer, config string, s *config.Config, t *decide.Table) {
	fmt.Fprintf(w, "gateway configuration %s: OK\n", config)
	fmt.Fprintf(w, "  table:     %s (serial %d, %s)\n", s.Table, t.Serial(), t.Digest())
	for i, u := range s.Gateway.Upstreams {
		label := "upstreams:"
		if i > 0 {
			label = "          "
		}
		note := ""
		if _, ok := t.Source().Servers[u.Name]; !ok {
			note = " (not in the table: everything it offers is denied)"
		}
		fmt.Fprintf(w, "  %s %s (%s)%s\n", label, u.Name, s.Kinds[u.Name], note)
	}
	if s.Address == "" {
		fmt.Fprintf(w, "  front:     stdio, principal %s\n", s.Principal)
	} else {
		principals := map[string]bool{}
		for _, p := range s.HTTP.Tokens {
			principals[p] = true
		}
		static := count(len(principals), "principal") + " with static tokens"
		switch {
		case s.HTTP.OAuth == nil:
			static = count(len(principals), "principal")
		case len(principals) == 0:
			static = "access tokens only"
		}
		fmt.Fprintf(w, "  front:     http on %s, %s%s\n", s.Address, static, behind(s.HTTP.TrustedProxies))
		if o := s.HTTP.OAuth; o != nil {
			var issuers []string
			for _, is := range s.OAuth.Issuers {
				issuers = append(issuers, fmt.Sprintf("%s (%s)", is.Name, is.URL))
			}
			scopes := "none required"
			if len(o.Scopes) > 0 {
				scopes = strings.Join(o.Scopes, " ")
			}
			fmt.Fprintf(w, "  oauth:     resource %s; issuers %s; scopes %s; clock skew %s\n",
				o.Verifier.Resource(), strings.Join(issuers, ", "), scopes, o.Verifier.Skew())
		}
		h := s.HTTP.WithDefaults()
		fmt.Fprintf(w, "  sessions:  at most %d open per principal; closed after %s without a request\n", h.MaxSessions, count(int(h.IdleTimeout/time.Minute), "minute"))
	}
	writeApprovalsCheck(w, s, t)
	writeObserveCheck(w, s)
	for _, warn := range checkWarnings(s, t) {
		fmt.Fprintf(w, "  warning:   %s\n", warn)
	}
}

// listenerWarnings are the HTTP listeners reached from other machines
// with no trusted proxy in front: the gateway has no TLS, so tokens and
// the page's cookies would cross the network in clear text there.
func listenerWarnings(s *config.Config) []string {
	var warns []string
	warn := func(key, addr string, proxies []netip.Prefix) {
		host, _, err := net.SplitHostPort(addr)
		if addr == "" || err != nil || config.Loopback(host) || len(proxies) > 0 {
			return
		}
		warns = append(warns, fmt.Sprintf("%s %q is not a loopback address: the gateway serves plain HTTP there, so tokens cross the network in clear text; put it behind a TLS-terminating proxy, named in trusted_proxies", key, addr))
	}
	warn("front.http.address", s.Address, s.HTTP.TrustedProxies)
	if s.Approvals != nil {
		warn("approvals.admin.address", s.AdminAddress, s.Admin.TrustedProxies)
	}
	return warns
}

// checkWarnings are the warnings of --check: the start's, and the
// listeners that could not listen now.
func checkWarnings(s *config.Config, t *decide.Table) []string {
	return append(append(listenerWarnings(s), gatewayWarnings(s, t)...), busyListeners(s)...)
}

// gatewayWarnings are what the configuration most likely misspells, as
// the table sees it: a principal it does not name while it names one close
// to it (the principal is then decided as anyone, without the narrowing
// of the groups it was meant to be in), and an upstream it does not have
// while it has a server of a close name that no upstream serves. Neither
// is an error: a principal no group names and an upstream the table denies
// whole are both meant at times. Under access tokens, principals come from
// the tokens, and are not checked here.
func gatewayWarnings(s *config.Config, t *decide.Table) []string {
	var warns []string
	principal := func(p, where string) {
		if near := nearPrincipal(t.Source(), p); near != "" {
			warns = append(warns, fmt.Sprintf("principal %q (%s) is in no group and has no scope of its own in the table, so it is decided as anyone, without any group's narrowing; did you mean %q?", p, where, near))
		}
	}
	if s.Address == "" {
		principal(s.Principal, "front.stdio.principal")
	} else {
		for _, p := range slices.Sorted(maps.Values(s.HTTP.Tokens)) {
			principal(p, "front.http.principals")
		}
	}
	served := map[string]bool{}
	for _, u := range s.Gateway.Upstreams {
		served[u.Name] = true
	}
	var unserved []string
	for name := range t.Source().Servers {
		if !served[name] {
			unserved = append(unserved, name)
		}
	}
	slices.Sort(unserved)
	for _, u := range s.Gateway.Upstreams {
		if _, ok := t.Source().Servers[u.Name]; ok {
			continue
		}
		if near := compiler.Suggest(u.Name, unserved); near != "" {
			warns = append(warns, fmt.Sprintf("upstream %q is not in the table, so everything it offers is denied; did you mean %q, a server of the table that no upstream serves?", u.Name, near))
		}
	}
	return slices.Compact(warns)
}

// writeApprovalsCheck prints the approval gate's lines of gateway --check.
func writeApprovalsCheck(w io.Writer, s *config.Config, t *decide.Table) {
	if s.Approvals == nil {
		fmt.Fprintf(w, "  approvals: no approval gate; ui:// resources stay denied\n")
		return
	}
	var channels []string
	for _, name := range sortedChannelNames(t) {
		channels = append(channels, fmt.Sprintf("%s (%s)", name, t.Source().Channels[name].Kind))
	}
	line := strings.Join(channels, ", ")
	if line == "" {
		line = "no channels in the table"
	}
	if s.AdminAddress != "" {
		line += "; admin on " + s.AdminAddress + behind(s.Admin.TrustedProxies) + adminApprovers(s)
	}
	fmt.Fprintf(w, "  approvals: %s\n", line)
	withProgress := "as long as the request lives"
	if p := s.Gateway.Holds.WithProgress; p > 0 {
		withProgress = fmt.Sprintf("%ds", p/time.Second)
	}
	fmt.Fprintf(w, "  holds:     in place %ds (with progress: %s, every %ds); approve once used within %ds; consent waits %ds\n",
		s.Gateway.Holds.InPlace/time.Second, withProgress, s.Approvals.ProgressInterval/time.Second, s.Approvals.OnceWindow/time.Second, s.Approvals.ConsentWait/time.Second)
}

// writeObserveCheck prints a line for each part of the observe block that
// is configured: where /metrics is served, and where traces go. A trace
// endpoint is shown without user information or query, which may carry
// a credential.
func writeObserveCheck(w io.Writer, s *config.Config) {
	o := s.Observe
	if o.Metrics {
		var on []string
		if s.Approvals != nil && s.AdminAddress != "" {
			on = append(on, "the approvals admin listener ("+s.AdminAddress+")")
		}
		if o.MetricsAddress != "" {
			on = append(on, o.MetricsAddress)
		}
		fmt.Fprintf(w, "  metrics:   /metrics on %s\n", strings.Join(on, " and on "))
	}
	if t := o.Tracing; t != nil {
		fmt.Fprintf(w, "  tracing:   OTLP/HTTP to %s; sample ratio %s of traces begun here; service %s\n",
			traceEndpoint(t.Endpoint), strconv.FormatFloat(t.SampleRatio, 'g', -1, 64), t.ServiceName)
	}
}

// traceEndpoint is where traces go, without the user information or
// query the endpoint may carry (a credential).
func traceEndpoint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String()
}

// sortedChannelNames lists the channels a table defines, those of the
// served servers first as the table names them.
func sortedChannelNames(t *decide.Table) []string {
	names := make([]string, 0, len(t.Source().Channels))
	for name := range t.Source().Channels {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		ki, kj := t.Source().Channels[names[i]].Kind, t.Source().Channels[names[j]].Kind
		if ki != kj {
			return ki < kj
		}
		return names[i] < names[j]
	})
	return names
}

// adminApprovers says, for the check's summary, who approves through the
// identity provider on the admin listener; "" without one.
func adminApprovers(s *config.Config) string {
	o := s.AdminOAuth
	if o == nil {
		return ""
	}
	out := fmt.Sprintf(" (approvers: groups %s of %s, audience %s", strings.Join(o.ApproverGroups, ", "), o.Identity.Issuers[0].URL, o.Identity.Resource)
	if o.SignIn != nil {
		out += "; page sign-in as client " + o.SignIn.ClientID
	}
	return out + ")"
}

// behind names a listener's trusted proxies, if any.
func behind(proxies []netip.Prefix) string {
	if len(proxies) == 0 {
		return ""
	}
	names := make([]string, len(proxies))
	for i, p := range proxies {
		names[i] = p.String()
	}
	return " behind " + strings.Join(names, ", ")
}

// checkGatewayFormat refuses a --format gateway does not have, or one
// given without --check (only the check prints a summary).
func checkGatewayFormat(o gatewayOptions) error {
	if err := checkFormat(o.format, "text", "json"); err != nil {
		return err
	}
	if o.format != "text" && !o.check {
		return usageErrorf("--format %s is the form of --check's summary: add --check", o.format)
	}
	return nil
}

// printGatewayCheck prints what gateway --check found, as text or JSON.
func printGatewayCheck(w io.Writer, o gatewayOptions, s *config.Config, t *decide.Table) error {
	if o.format != "json" {
		writeGatewayCheck(w, o.config, s, t)
		return nil
	}
	return writeJSON(w, gatewayCheckReport(o.config, s, t))
}

// gatewayCheckJSON is gateway --check --format json: what the text
// summary says, as fields.
type gatewayCheckJSON struct {
	Config    string          `json:"config"`
	Table     tableJSON       `json:"table"`
	Upstreams []checkUpstream `json:"upstreams"`
	Front     checkFront      `json:"front"`
	Approvals *checkApprovals `json:"approvals"`
	Metrics   []string        `json:"metrics,omitempty"`
	Tracing   *checkTracing   `json:"tracing,omitempty"`
	Warnings  []string        `json:"warnings,omitempty"`
}

// tableJSON names a signed table in the JSON of verify and gateway --check.
type tableJSON struct {
	File   string `json:"file"`
	Serial uint64 `json:"serial"`
	Digest string `json:"digest"`
}

type checkUpstream struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	InTable bool   `json:"in_table"`
}

type checkFront struct {
	Transport string `json:"transport"`
	// Principal is the stdio front's; Principals the HTTP front's static
	// tokens' (how many).
	Principal          string        `json:"principal,omitempty"`
	Address            string        `json:"address,omitempty"`
	Principals         int           `json:"principals,omitempty"`
	OAuthResource      string        `json:"oauth_resource,omitempty"`
	OAuthIssuers       []checkIssuer `json:"oauth_issuers,omitempty"`
	MaxSessions        int           `json:"max_sessions,omitempty"`
	IdleTimeoutMinutes int           `json:"idle_timeout_minutes,omitempty"`
}

type checkIssuer struct {
	Name   string `json:"name"`
	Issuer string `json:"issuer"`
}

type checkApprovals struct {
	Channels     map[string]string `json:"channels"`
	AdminAddress string            `json:"admin_address,omitempty"`
	// Seconds; WithProgressSeconds 0 is as long as the request lives.
	HoldInPlaceSeconds      int64 `json:"hold_in_place_seconds"`
	HoldWithProgressSeconds int64 `json:"hold_with_progress_seconds"`
	ProgressIntervalSeconds int64 `json:"progress_interval_seconds"`
	ApproveOnceWindowSecs   int64 `json:"approve_once_window_seconds"`
	ConsentWaitSeconds      int64 `json:"consent_wait_seconds"`
}

type checkTracing struct {
	Endpoint    string  `json:"endpoint"`
	SampleRatio float64 `json:"sample_ratio"`
	ServiceName string  `json:"service_name"`
}

func gatewayCheckReport(path string, s *config.Config, t *decide.Table) gatewayCheckJSON {
	r := gatewayCheckJSON{Config: path, Table: tableJSON{File: s.Table, Serial: t.Serial(), Digest: t.Digest()}, Upstreams: []checkUpstream{}}
	for _, u := range s.Gateway.Upstreams {
		_, in := t.Source().Servers[u.Name]
		r.Upstreams = append(r.Upstreams, checkUpstream{Name: u.Name, Kind: s.Kinds[u.Name], InTable: in})
	}
	if s.Address == "" {
		r.Front = checkFront{Transport: "stdio", Principal: s.Principal}
	} else {
		principals := map[string]bool{}
		for _, p := range s.HTTP.Tokens {
			principals[p] = true
		}
		h := s.HTTP.WithDefaults()
		r.Front = checkFront{Transport: "http", Address: s.Address, Principals: len(principals),
			MaxSessions: h.MaxSessions, IdleTimeoutMinutes: int(h.IdleTimeout / time.Minute)}
		if o := s.HTTP.OAuth; o != nil {
			r.Front.OAuthResource = o.Verifier.Resource()
			for _, is := range s.OAuth.Issuers {
				r.Front.OAuthIssuers = append(r.Front.OAuthIssuers, checkIssuer{Name: is.Name, Issuer: is.URL})
			}
		}
	}
	if a := s.Approvals; a != nil {
		r.Approvals = &checkApprovals{Channels: map[string]string{}, AdminAddress: s.AdminAddress,
			HoldInPlaceSeconds:      int64(s.Gateway.Holds.InPlace / time.Second),
			HoldWithProgressSeconds: int64(s.Gateway.Holds.WithProgress / time.Second),
			ProgressIntervalSeconds: int64(a.ProgressInterval / time.Second),
			ApproveOnceWindowSecs:   int64(a.OnceWindow / time.Second),
			ConsentWaitSeconds:      int64(a.ConsentWait / time.Second)}
		for _, name := range sortedChannelNames(t) {
			r.Approvals.Channels[name] = t.Source().Channels[name].Kind
		}
	}
	if o := s.Observe; o.Metrics {
		if s.Approvals != nil && s.AdminAddress != "" {
			r.Metrics = append(r.Metrics, s.AdminAddress)
		}
		if o.MetricsAddress != "" {
			r.Metrics = append(r.Metrics, o.MetricsAddress)
		}
	}
	if tr := s.Observe.Tracing; tr != nil {
		r.Tracing = &checkTracing{Endpoint: traceEndpoint(tr.Endpoint), SampleRatio: tr.SampleRatio, ServiceName: tr.ServiceName}
	}
	r.Warnings = checkWarnings(s, t)
	return r
}
