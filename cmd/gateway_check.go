package cmd

import (
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

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
		endpoint := t.Endpoint
		if u, err := url.Parse(endpoint); err == nil {
			u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
			if u.Path == "" || u.Path == "/" {
				u.Path = "/v1/traces"
			}
			endpoint = u.String()
		}
		fmt.Fprintf(w, "  tracing:   OTLP/HTTP to %s; sample ratio %s of traces begun here; service %s\n",
			endpoint, strconv.FormatFloat(t.SampleRatio, 'g', -1, 64), t.ServiceName)
	}
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
