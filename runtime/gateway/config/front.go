package config

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/authlimit"
	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/gateway"
)

// The approval gate's timings when the configuration leaves them out (the
// schema's defaults). They are passed to the gate explicitly, so that a
// check prints what the gate runs with.
const (
	defaultConsentWait      = 60 * time.Second
	defaultOnceWindow       = 5 * time.Minute
	defaultProgressInterval = 15 * time.Second
)

// front checks the front the clients connect to: stdio for one principal,
// or streamable HTTP with a token hash per principal.
func (r *reader) front() {
	c := r.c
	// Which fronts are set is read from the configuration as written: a
	// refused value inside one leaves it unread, but still set. That none
	// is set is not said beside a refused key in front (a misspelt stdio).
	stdio, http := r.set("front.stdio"), r.set("front.http")
	switch fr := r.file.Front; {
	case stdio && http:
		r.badShape("front", "both stdio and http are set; the gateway has one front", "keep one of them")
	case !stdio && !http:
		if r.o.Use == ForPull && !r.set("front") {
			return // a pull starts no front, and need not name one
		}
		r.bad("front", "no front is set", `give stdio: principal: "NAME" or http: {address: "127.0.0.1:8080", principals: ...}`)
	case fr.Stdio == nil && fr.HTTP == nil:
		// The one front set was refused as a whole.
	case fr.Stdio != nil:
		c.Principal = fr.Stdio.Principal
	default:
		h := fr.HTTP
		if err := checkListenAddress(h.Address); err != nil {
			r.bad("front.http.address", fmt.Sprintf("%q is not host:port (%v)", h.Address, err), `for example "127.0.0.1:8080"`)
		}
		c.Address = h.Address
		c.HTTP.Tokens = map[string]string{}
		c.HTTP.IdleTimeout = time.Duration(h.IdleTimeoutMinutes) * time.Minute
		c.HTTP.MaxSessions = h.MaxSessions
		c.HTTP.TrustedProxies = r.proxies("front.http.trusted_proxies", h.TrustedProxies)
		principals := slices.Sorted(maps.Keys(h.Principals))
		switch {
		case len(principals) > 0 || r.set("front.http.oauth"):
		case r.set("front.http.principals"):
			// The front would refuse to start, after the upstreams were
			// connected: say it while reading, for --check too.
			r.bad("front.http.principals", "no principal: the HTTP front admits only clients with a configured token, so no client could connect",
				`add a principal with the SHA-256 of its bearer token, e.g. principals: alice: token_sha256: ["..."] (printf %s "$TOKEN" | sha256sum), or an identity provider (oauth)`)
		default:
			r.bad("front.http", "neither principals nor oauth is set: the HTTP front would admit no client",
				`give principals: alice: token_sha256: ["..."] for static tokens (printf %s "$TOKEN" | sha256sum), or oauth: {resource: "https://...", issuers: ...} for an identity provider's access tokens`)
		}
		r.oauth(h.OAuth)
		for _, p := range principals {
			if len(h.Principals[p].TokenSHA256) == 0 {
				r.bad("front.http.principals."+p+".token_sha256", "no token: this principal could never connect", "add the SHA-256 of its bearer token, or remove the principal")
			}
			for _, hash := range h.Principals[p].TokenSHA256 {
				if q, dup := c.HTTP.Tokens[hash]; dup && q != p {
					r.bad("front.http.principals."+p+".token_sha256", fmt.Sprintf("token hash %s… is also %s's: a token identifies one principal", hash[:12], q), "give each principal its own token")
				}
				c.HTTP.Tokens[hash] = p
			}
		}
	}
}

// approvals checks the approvals block: the gate's timings, the settings
// per server, the webhook secret and the admin listener.
func (r *reader) approvals() {
	a := r.file.Approvals
	if a == nil {
		return
	}
	c, file := r.c, r.file
	envWhere, envWhen := r.o.Use.environment()
	c.Approvals = &approval.Config{
		Servers:          map[string]approval.ServerOptions{},
		ConsentWait:      seconds(a.ConsentWaitSeconds, defaultConsentWait),
		OnceWindow:       seconds(a.ApproveOnceWindowSeconds, defaultOnceWindow),
		ProgressInterval: seconds(a.ProgressIntervalSeconds, defaultProgressInterval),
		MaxPending:       a.MaxPending,
	}
	c.Gateway.Holds = gateway.HoldOptions{
		InPlace:      seconds(a.HoldInPlaceSeconds, gateway.DefaultHoldInPlace),
		WithProgress: seconds(a.HoldWithProgressSeconds, 0),
		Principals:   secondsMap(a.HoldInPlacePrincipals),
		Clients:      secondsMap(a.HoldInPlaceClients),
	}
	upstreams := slices.Sorted(maps.Keys(file.Upstreams))
	for _, name := range slices.Sorted(maps.Keys(a.Servers)) {
		so := a.Servers[name]
		// A server that is not an upstream would take the settings
		// silently: a misspelt preview: false would leave previews on.
		if _, ok := file.Upstreams[name]; !ok && !r.broken("upstreams."+name) {
			hint := "name a server of upstreams: " + strings.Join(upstreams, ", ")
			if near := compiler.Suggest(name, upstreams); near != "" {
				hint = fmt.Sprintf("did you mean %q? The upstreams: %s", near, strings.Join(upstreams, ", "))
			}
			r.badShape("approvals.servers."+name, fmt.Sprintf("%q is not an upstream: its settings would apply to nothing", name), hint)
			continue
		}
		c.Approvals.Servers[name] = approval.ServerOptions{MaxDuration: so.MaxApproval, NoPreview: so.Preview != nil && !*so.Preview}
	}
	// A pull sends no webhook: the secret need not be set for it.
	if a.WebhookSecretEnv != "" && r.o.Use == ForGateway {
		secret, set := os.LookupEnv(a.WebhookSecretEnv)
		switch {
		case !set:
			r.bad("approvals.webhook_secret_env", fmt.Sprintf("%s must hold at least 16 bytes and is not set in %s", varName(a.WebhookSecretEnv), envWhere),
				envWhen+", e.g. with: openssl rand -hex 32 (webhook receivers verify deliveries with the same secret)")
		case len(secret) < 16:
			r.bad("approvals.webhook_secret_env", fmt.Sprintf("%s must hold at least 16 bytes (it holds %d)", varName(a.WebhookSecretEnv), len(secret)), "export it before starting the gateway, e.g. with: openssl rand -hex 32")
		}
		c.Approvals.Webhook.Secret = []byte(secret)
	}
	ad := a.Admin
	if ad == nil {
		return
	}
	if err := checkListenAddress(ad.Address); err != nil {
		r.bad("approvals.admin.address", fmt.Sprintf("%q is not host:port (%v)", ad.Address, err), `for example "127.0.0.1:8443"`)
	} else if sameListener(ad.Address, c.Address) {
		// The second listener would fail to start, after the upstreams
		// were connected: say it while reading.
		r.bad("approvals.admin.address", fmt.Sprintf("%q is also where front.http.address (%q) listens: the admin listener needs an address of its own", ad.Address, c.Address),
			"give it a port of its own, on an internal address")
	} else if host, _, _ := net.SplitHostPort(ad.Address); Wildcard(host) && ad.PublicURL == "" {
		// Links to requests would name the wildcard, which no approver
		// can open.
		r.bad("approvals.admin.address", fmt.Sprintf("%q listens on every address, and approvals.admin.public_url is not set: the links to requests sent to agents and webhooks would name no address an approver could open", ad.Address),
			`set public_url to the URL approvers open, e.g. public_url: "https://approvals.example.com" (a TLS proxy in front, with trusted_proxies), or listen on one address`)
	}
	c.AdminAddress = ad.Address
	c.Approvals.PageServed = true
	// Without public_url, links name the listener's address once it
	// listens.
	c.Approvals.PageURL = ad.PublicURL
	c.Admin.Approvers = map[string]string{}
	c.Admin.ClientTokens = maps.Clone(c.HTTP.Tokens)
	if c.Admin.ClientTokens == nil {
		c.Admin.ClientTokens = map[string]string{}
	}
	names := slices.Sorted(maps.Keys(ad.Approvers))
	if len(names) == 0 && ad.OAuth == nil {
		// The listener would refuse to start, after the upstreams were
		// connected: say it while reading, for --check too.
		r.bad("approvals.admin.approvers", "no approver: the approvals page and the admin API admit approvers only, so no one could decide a held call",
			`add an approver with the SHA-256 of its token, e.g. approvers: carol: token_sha256: ["..."] (printf %s "$TOKEN" | sha256sum), or an identity provider (oauth), or remove admin`)
	}
	r.adminOAuth(ad.OAuth, ad.PublicURL)
	c.Admin.TrustedProxies = r.proxies("approvals.admin.trusted_proxies", ad.TrustedProxies)
	for _, n := range names {
		key := "approvals.admin.approvers." + n + ".token_sha256"
		if len(ad.Approvers[n].TokenSHA256) == 0 {
			r.bad(key, "no token: this approver could never sign in", "add the SHA-256 of its token, or remove the approver")
		}
		for _, hash := range ad.Approvers[n].TokenSHA256 {
			if q, dup := c.Admin.Approvers[hash]; dup && q != n {
				r.bad(key, fmt.Sprintf("token hash %s… is also %s's: a token identifies one approver", hash[:12], q), "give each approver its own token")
			}
			if p, dup := c.HTTP.Tokens[hash]; dup {
				r.bad(key, fmt.Sprintf("token hash %s… is also the MCP client token of %s: an agent must not be able to approve", hash[:12], p), "give approvers tokens of their own")
			}
			c.Admin.Approvers[hash] = n
		}
	}
}

// seconds is a configured number of seconds, or def when it is not set
// (the schema admits only positive values).
// secondsMap is a map of seconds as durations, nil when empty.
func secondsMap(m map[string]int) map[string]time.Duration {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]time.Duration, len(m))
	for k, n := range m {
		out[k] = time.Duration(n) * time.Second
	}
	return out
}

func seconds(n int, def time.Duration) time.Duration {
	if n == 0 {
		return def
	}
	return time.Duration(n) * time.Second
}

// proxies reads the trusted proxies of a listener at key.
func (r *reader) proxies(key string, list []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range list {
		p, err := authlimit.ParseProxy(s)
		if err != nil {
			r.bad(key, fmt.Sprintf("%q is not an IP address or a CIDR range", s), `give the proxy's address, e.g. "10.0.0.7", or its network, e.g. "10.0.0.0/8"`)
			continue
		}
		if p.Bits() == 0 {
			r.bad(key, fmt.Sprintf("%q is every address: any client could then say whom it speaks for", s), "name the proxies' own addresses or network")
			continue
		}
		out = append(out, p)
	}
	return out
}
