package config

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/policyc/policyc/runtime/gateway"
)

// upstreams checks the upstream servers and fills in how to reach each.
func (r *reader) upstreams() {
	o, c, file := r.o, r.c, r.file
	envWhere, envWhen := o.Use.environment()
	names := slices.Sorted(maps.Keys(file.Upstreams))
	if len(names) == 0 && o.Use == ForGateway {
		// The gateway would refuse to start without naming the file or
		// the key: say it while reading, for --check too. (A catalog pull
		// says it has nothing to pull.)
		r.bad("upstreams", "no upstream: the gateway would serve nothing",
			`add at least one server, e.g. upstreams: memory: command: ["npx", "-y", "@modelcontextprotocol/server-memory"]`)
	}
	for _, name := range names {
		u := file.Upstreams[name]
		key := "upstreams." + name
		if err := gateway.CheckUpstreamName(name); err != nil {
			r.badShape(key, err.Error(), "")
			continue
		}
		up := gateway.Upstream{Name: name}
		if u.Command != nil && len(u.Command) == 0 {
			r.bad(key+".command", "the command is empty", `give the program and its arguments, e.g. ["npx", "-y", "@modelcontextprotocol/server-memory"]`)
			continue
		}
		// Which keys are set is read from the configuration as written: a
		// value the schema refused is unread, but set all the same.
		hasCommand, hasURL := r.set(key+".command"), r.set(key+".url")
		switch {
		case hasCommand && hasURL:
			r.badShape(key, "both command and url are set; an upstream is either a stdio command or a streamable HTTP url", "keep one of them")
			continue
		case !hasCommand && !hasURL:
			// Not said beside a refused key of the upstream: it may be
			// the command or url, misspelt.
			r.bad(key, "neither command nor url is set", `give command: ["program", "arg", ...] for a stdio server or url: "https://..." for a streamable HTTP one`)
			continue
		case hasURL:
			if r.set(key+".env") || r.set(key+".pass_env") || r.set(key+".dir") {
				r.badShape(key, "env, pass_env and dir apply to a stdio command, not to a url", "remove them, or use bearer_token_env for the url's credentials")
			}
			up.URL = u.URL
			c.Kinds[name] = "http: " + withoutUserinfo(u.URL)
			if u.BearerTokenEnv != "" {
				tok := os.Getenv(u.BearerTokenEnv)
				if tok == "" {
					r.bad(key+".bearer_token_env", fmt.Sprintf("%s is not set in %s", varName(u.BearerTokenEnv), envWhere), envWhen)
				}
				up.Header = http.Header{"Authorization": {"Bearer " + tok}}
			}
		default:
			if r.set(key + ".bearer_token_env") {
				r.badShape(key+".bearer_token_env", "bearer_token_env applies to a url, not to a stdio command", "pass the token with pass_env instead")
			}
			up.Dir = r.abs(u.Dir)
			if up.Dir != "" {
				if st, err := os.Stat(up.Dir); err != nil || !st.IsDir() {
					r.bad(key+".dir", fmt.Sprintf("%s is not a directory", u.Dir), "")
				}
			}
			if slices.ContainsFunc(u.Command, func(a string) bool { return strings.ContainsRune(a, 0) }) {
				// The start would fail, and be retried, forever.
				r.bad(key+".command", "an argument contains a NUL character, which no program argument can hold", "remove it")
				continue
			}
			if len(u.Command) > 0 { // else the schema refused it
				prog, err := findProgram(u.Command[0], r.dir)
				if err != nil {
					r.bad(key+".command", err.Error(), "install it, or give its full path")
				}
				up.Command, up.Args = prog, u.Command[1:]
				c.Kinds[name] = "stdio: " + u.Command[0]
			}
			up.Env = gateway.BaseEnv()
			for _, v := range u.PassEnv {
				val, ok := os.LookupEnv(v)
				if !ok {
					r.bad(key+".pass_env", fmt.Sprintf("%s is not set in %s", varName(v), envWhere), envWhen+", or remove it from pass_env")
				}
				up.Env = append(up.Env, v+"="+val)
			}
			for _, k := range slices.Sorted(maps.Keys(u.Env)) {
				if strings.ContainsRune(u.Env[k], 0) {
					// The value is not repeated: it may be a secret.
					r.bad(key+".env."+k, "the value contains a NUL character, which no environment variable can hold", "remove it")
				}
				up.Env = append(up.Env, k+"="+u.Env[k])
			}
		}
		c.Gateway.Upstreams = append(c.Gateway.Upstreams, up)
	}
}
