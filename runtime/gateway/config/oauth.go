package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/gateway/identity"
)

// oauthFile is front.http.oauth as written.
type oauthFile struct {
	Resource         string                `json:"resource"`
	Scopes           []string              `json:"scopes"`
	ClockSkewSeconds *int                  `json:"clock_skew_seconds"`
	Issuers          map[string]issuerFile `json:"issuers"`
}

type issuerFile struct {
	Issuer         string            `json:"issuer"`
	JWKSURL        string            `json:"jwks_url"`
	PrincipalClaim string            `json:"principal_claim"`
	GroupsClaim    string            `json:"groups_claim"`
	Groups         map[string]string `json:"groups"`
	GroupsOptional bool              `json:"groups_optional"`
}

// oauthKey is where the HTTP front's identity providers are configured.
const oauthKey = "front.http.oauth"

// oauth checks front.http.oauth: the gateway's resource URL, the scopes
// and each issuer. What needs the network (discovery, the keys) is left
// to the verifier the command makes from c.OAuth.
func (r *reader) oauth(o *oauthFile) {
	if o == nil {
		return
	}
	c := r.c
	cfg := &identity.Config{Resource: o.Resource}
	c.OAuth, c.OAuthScopes = cfg, slices.Clone(o.Scopes)
	c.issuerPos = map[string]compiler.Position{}
	if err := checkServerURL(o.Resource, true); err != nil {
		r.bad(oauthKey+".resource", fmt.Sprintf("%q %v", withoutUserinfo(o.Resource), err),
			`give the gateway's URL as its clients reach it, e.g. resource: "https://mcp.example.com/": tokens must name it in aud`)
	}
	if o.ClockSkewSeconds != nil {
		cfg.Skew = time.Duration(*o.ClockSkewSeconds) * time.Second
		if cfg.Skew == 0 {
			cfg.Skew = -1 // none at all, not the default
		}
	}
	seenScope := map[string]bool{}
	for _, s := range o.Scopes {
		if seenScope[s] {
			r.bad(oauthKey+".scopes", fmt.Sprintf("scope %q is listed twice", s), "list each scope once")
		}
		seenScope[s] = true
	}
	names := slices.Sorted(maps.Keys(o.Issuers))
	if len(names) == 0 {
		r.bad(oauthKey+".issuers", "no issuer: no access token could be verified",
			`add the identity provider, e.g. issuers: corp: issuer: "https://idp.example.com"`)
	}
	byURL := map[string]string{}
	for _, name := range names {
		is := o.Issuers[name]
		key := oauthKey + ".issuers." + name
		c.issuerPos[name] = r.ev.KeyPos(key)
		if err := checkServerURL(is.Issuer, false); err != nil {
			r.bad(key+".issuer", fmt.Sprintf("%q %v", withoutUserinfo(is.Issuer), err),
				"give the provider's issuer identifier exactly as its tokens' iss claim has it")
		} else if prev, dup := byURL[is.Issuer]; dup {
			r.badShape(key+".issuer", fmt.Sprintf("%s is also issuer %s: one issuer is configured once", is.Issuer, prev),
				"merge the two, or remove one")
		}
		byURL[is.Issuer] = name
		if is.JWKSURL != "" {
			if err := checkServerURL(is.JWKSURL, false); err != nil {
				r.bad(key+".jwks_url", fmt.Sprintf("%q %v", withoutUserinfo(is.JWKSURL), err),
					"give the provider's JWKS URL, or leave jwks_url out to find it by OpenID discovery")
			}
		}
		switch {
		case len(is.Groups) > 0 && is.GroupsClaim == "":
			r.badShape(key+".groups", "maps the provider's groups, but groups_claim does not say which claim lists them",
				`add groups_claim: "groups" (or the claim your provider lists groups in)`)
		case is.GroupsClaim != "" && len(is.Groups) == 0 && r.set(key+".groups_claim"):
			r.badShape(key+".groups_claim", "names the groups claim, but groups maps none of the provider's groups to the policy's, so no token would have a group",
				`map them, e.g. groups: "idp-contractors": "contractors" (the provider's name: the policy's)`)
		case is.GroupsOptional && is.GroupsClaim == "":
			r.badShape(key+".groups_optional", "applies to the groups claim, and groups_claim is not set", "remove it, or set groups_claim")
		}
		cfg.Issuers = append(cfg.Issuers, identity.Issuer{Name: name, URL: is.Issuer, JWKSURL: is.JWKSURL,
			PrincipalClaim: is.PrincipalClaim, GroupsClaim: is.GroupsClaim, Groups: maps.Clone(is.Groups), GroupsOptional: is.GroupsOptional})
	}
}

// The schema's patterns (schema/gateway.cue) that oauthWording rewords.
const (
	boundScope     = `=~"^[!#-\\[\\]-~]+$"`
	boundClaimName = `=~"^[^\\s.]+(\\.[^\\s.]+)*$"`
)

// oauthWording rewords the schema's refusals in front.http.oauth: a scope
// or claim name that does not match its pattern, and an audience key
// where the resource is meant.
func oauthWording(d *compiler.Diagnostic) {
	if !strings.HasPrefix(d.Path, oauthKey+".") && !strings.HasPrefix(d.Path, adminOAuthKey+".") {
		return
	}
	if value, bound, ok := d.CUE.OutOfBound(); ok {
		v, err := strconv.Unquote(value)
		if err != nil {
			return
		}
		switch bound {
		case boundScope:
			d.Message = fmt.Sprintf("%s: %q is not an OAuth scope (printable ASCII without spaces, quotes or backslashes)", d.Path, v)
			if f := strings.Fields(v); len(f) > 1 {
				d.Suggestion = "list each scope on its own: scopes: " + quotedList(f)
			}
		case boundClaimName:
			d.Message = fmt.Sprintf("%s: %q is not a claim name (no spaces; a dot separates the steps of a path into an object)", d.Path, v)
			if s := strings.Join(strings.Fields(v), "_"); s != v && s != "" {
				d.Suggestion = fmt.Sprintf("the claim's name as the token has it, e.g. %s: %q", d.Path[strings.LastIndexByte(d.Path, '.')+1:], s)
			}
		}
		return
	}
	key := d.Path[strings.LastIndexByte(d.Path, '.')+1:]
	if strings.HasPrefix(strings.TrimPrefix(d.Message, d.Path+": "), "unknown key") && (key == "audience" || key == "aud") {
		d.Suggestion = "every token must name the gateway itself as its audience: that is " + oauthKey + ".resource, for all issuers"
	}
}

// checkServerURL checks a URL the gateway trusts for tokens: absolute,
// https:// (http:// only on a loopback address, for a provider on the
// same host), without credentials or a fragment; a resource without a
// query either.
func checkServerURL(s string, resource bool) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errors.New("is not a URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return errors.New("must start with https://")
	case u.Host == "":
		return errors.New("has no host")
	case u.User != nil:
		return errors.New("must not hold a user name or password")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return errors.New("must not have a #fragment")
	case resource && u.RawQuery != "":
		return errors.New("must not have a ?query (RFC 8707)")
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return errors.New("must be https:// (http:// only for a loopback address such as 127.0.0.1)")
	}
	return nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// IssuerDiagnostic is the problem of an issuer whose keys could not be
// had when the gateway started (an *identity.BootError), at the issuer's
// key; another error is reported at front.http.oauth.
func (c *Config) IssuerDiagnostic(err error) compiler.Diagnostic {
	key, pos := oauthKey, c.issuerPos[""]
	var be *identity.BootError
	if errors.As(err, &be) {
		if p, ok := c.issuerPos[be.Issuer]; ok {
			key, pos = oauthKey+".issuers."+be.Issuer, p
		}
	}
	return compiler.Diagnostic{Pos: pos, Code: compiler.CodeGatewayConfig, Severity: compiler.Error, Path: key,
		Message:    key + ": " + err.Error(),
		Suggestion: "the gateway does not start without the keys of every issuer it trusts: check that the provider is reachable from here, and its issuer (or jwks_url)"}
}

// CheckGroups checks that every policy group an issuer's tokens are mapped
// to is a group of table t: a mapping to a group the policy does not have
// would narrow nothing, silently.
func (c *Config) CheckGroups(t *decide.Table) error {
	if c.OAuth == nil {
		return nil
	}
	have := map[string]bool{}
	for _, sc := range t.Source().Scopes {
		if g, ok := strings.CutPrefix(sc.Name, "group:"); ok {
			have[g] = true
		}
	}
	var problems []string
	for _, is := range c.OAuth.Issuers {
		for _, from := range slices.Sorted(maps.Keys(is.Groups)) {
			if g := is.Groups[from]; !have[g] {
				problems = append(problems, fmt.Sprintf("%s.issuers.%s.groups maps %q to group %q, which the table does not define (its groups: %s)",
					oauthKey, is.Name, from, g, groupNames(have)))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrUnknownGroup, strings.Join(problems, "; "))
	}
	return nil
}

// ErrUnknownGroup is a group mapping to a group the table does not define.
var ErrUnknownGroup = errors.New("the configuration maps tokens to groups the policy does not have")

func groupNames(have map[string]bool) string {
	if len(have) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(have)), ", ")
}

// adminOAuthFile is approvals.admin.oauth as written.
type adminOAuthFile struct {
	Issuer           string   `json:"issuer"`
	JWKSURL          string   `json:"jwks_url"`
	Audience         string   `json:"audience"`
	PrincipalClaim   string   `json:"principal_claim"`
	GroupsClaim      string   `json:"groups_claim"`
	ApproverGroups   []string `json:"approver_groups"`
	ClockSkewSeconds *int     `json:"clock_skew_seconds"`
	SignIn           *struct {
		ClientID        string   `json:"client_id"`
		ClientSecretEnv string   `json:"client_secret_env"`
		Scopes          []string `json:"scopes"`
	} `json:"sign_in"`
}

// adminOAuthKey is where approvers from an identity provider are
// configured.
const adminOAuthKey = "approvals.admin.oauth"

// adminOAuth checks approvals.admin.oauth: the provider, the audience
// (default the admin listener's public URL) and the approver groups, and
// the page's sign-in client. What needs the network is left to
// approval.NewAdminOAuth, which the command calls with c.AdminOAuth.
func (r *reader) adminOAuth(o *adminOAuthFile, publicURL string) {
	if o == nil {
		return
	}
	key := adminOAuthKey
	if err := checkServerURL(o.Issuer, false); err != nil {
		r.bad(key+".issuer", fmt.Sprintf("%q %v", withoutUserinfo(o.Issuer), err),
			"give the provider's issuer identifier exactly as its tokens' iss claim has it")
	}
	if o.JWKSURL != "" {
		if err := checkServerURL(o.JWKSURL, false); err != nil {
			r.bad(key+".jwks_url", fmt.Sprintf("%q %v", withoutUserinfo(o.JWKSURL), err),
				"give the provider's JWKS URL, or leave jwks_url out to find it by OpenID discovery")
		}
	}
	aud, audKey := o.Audience, key+".audience"
	if aud == "" {
		aud, audKey = publicURL, "approvals.admin.public_url"
	}
	switch {
	case aud == "":
		r.badShape(key, "has no audience: the admin side's tokens must name it, and neither audience nor approvals.admin.public_url is set",
			`set audience: "https://approvals.example.com/" (the resource the provider issues the admin side's tokens for), or public_url`)
	default:
		if err := checkServerURL(aud, true); err != nil {
			r.bad(audKey, fmt.Sprintf("%q %v", withoutUserinfo(aud), err), "give the admin listener's URL as approvers reach it: tokens must name it in aud")
		} else if r.c.OAuth != nil && strings.TrimSuffix(aud, "/") == strings.TrimSuffix(r.c.OAuth.Resource, "/") {
			// An agent's token for the MCP front would then be
			// admitted by the admin side.
			r.badShape(audKey, fmt.Sprintf("%q is also front.http.oauth.resource: an agent's access token would be an approver's", aud),
				"give the admin side an audience of its own (its public_url, say), for which the provider issues approvers' tokens")
		}
	}
	groupsClaim := o.GroupsClaim
	if groupsClaim == "" {
		groupsClaim = "groups"
	}
	if len(o.ApproverGroups) == 0 {
		r.bad(key+".approver_groups", "lists no group: no token would be an approver's",
			`list the provider's groups whose members approve, e.g. approver_groups: ["release-managers"]`)
	}
	groups := map[string]string{}
	for _, g := range o.ApproverGroups {
		if _, dup := groups[g]; dup {
			r.bad(key+".approver_groups", fmt.Sprintf("group %q is listed twice", g), "list each group once")
		}
		groups[g] = approval.ApproverGroup
	}
	is := identity.Issuer{Name: "approvals", URL: o.Issuer, JWKSURL: o.JWKSURL, PrincipalClaim: o.PrincipalClaim,
		GroupsClaim: groupsClaim, Groups: groups, GroupsOptional: true}
	cfg := &approval.AdminOAuthConfig{Identity: identity.Config{Resource: aud, Issuers: []identity.Issuer{is}},
		ApproverGroups: slices.Clone(o.ApproverGroups), GroupsClaim: groupsClaim}
	if o.ClockSkewSeconds != nil {
		cfg.Identity.Skew = time.Duration(*o.ClockSkewSeconds) * time.Second
		if cfg.Identity.Skew == 0 {
			cfg.Identity.Skew = -1 // none at all, not the default
		}
	}
	if s := o.SignIn; s != nil {
		sc := &approval.SignInConfig{ClientID: s.ClientID, Scopes: slices.Clone(s.Scopes)}
		if s.ClientSecretEnv != "" && r.o.Use == ForGateway {
			envWhere, envWhen := r.o.Use.environment()
			secret, set := os.LookupEnv(s.ClientSecretEnv)
			if !set || secret == "" {
				r.bad(key+".sign_in.client_secret_env", fmt.Sprintf("%s must hold the page's client secret and is not set in %s", varName(s.ClientSecretEnv), envWhere),
					envWhen+" with the secret the provider gave the approvals page's client, or leave client_secret_env out for a public client")
			}
			sc.ClientSecret = secret
		}
		cfg.SignIn = sc
	}
	r.c.AdminOAuth = cfg
	r.c.adminOAuthPos = r.ev.KeyPos(key)
}

// AdminOAuthDiagnostic is the problem of the admin side's identity
// provider when its keys or discovery document could not be had at start.
func (c *Config) AdminOAuthDiagnostic(err error) compiler.Diagnostic {
	return compiler.Diagnostic{Pos: c.adminOAuthPos, Code: compiler.CodeGatewayConfig, Severity: compiler.Error, Path: adminOAuthKey,
		Message:    adminOAuthKey + ": " + err.Error(),
		Suggestion: "the gateway does not start without the keys of the approvers' identity provider: check that it is reachable from here, and its issuer (or jwks_url)"}
}
