package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"cuelang.org/go/cue"

	"github.com/policyc/policyc/compiler"
)

// wholeUnits rewords a type error on a timing key (*_seconds, *_minutes)
// or a count (max_sessions):
// CUE's "conflicting values 1.5 and int (mismatched types float and int)"
// becomes what the key needs, a whole number of its unit. src is the
// configuration as written.
func wholeUnits(d *compiler.Diagnostic, src cue.Value) {
	key := d.Path[strings.LastIndex(d.Path, ".")+1:]
	var unit string
	switch {
	case strings.HasSuffix(key, "_seconds"):
		unit = "seconds"
	case strings.HasSuffix(key, "_minutes"):
		unit = "minutes"
	case key == "max_sessions":
		unit = "sessions"
	default:
		return
	}
	if _, _, ok := d.CUE.Mismatch(); !ok || !src.Exists() {
		return
	}
	v := src.LookupPath(cue.ParsePath(d.Path))
	if !v.Exists() || v.Kind() == cue.IntKind {
		return
	}
	written := fmt.Sprint(v)
	d.Message = fmt.Sprintf("%s: a whole number of %s is required, not %s", d.Path, unit, written)
	// The example is the value written, made whole, when every timing key
	// allows it (1 to 600); else 30.
	n := int64(30)
	if f, err := v.Float64(); err == nil && f > 0 && f <= 600 {
		n = int64(max(1, math.Trunc(f)))
	} else if s, err := v.String(); err == nil {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil && i >= 1 && i <= 600 {
			n = i
		}
	}
	d.Suggestion = fmt.Sprintf("write an integer, without a decimal point or quotes, e.g. %s: %d", key, n)
}

// The schema's patterns (schema/gateway.cue) whose bounds valueWording
// rewords.
const (
	boundSHA256   = `=~"^[0-9a-f]{64}$"`
	boundURL      = `=~"^https?://"`
	boundEnvName  = `=~"^[A-Za-z_][A-Za-z0-9_]*$"`
	boundNonEmpty = `!=""`
)

// badNameRE reads the compiler's own message for a key that is not a
// valid name (plainUnknownKey).
var badNameRE = regexp.MustCompile(`^(".*") is not a valid name$`)

// maxApprovals are the values of approvals.servers.NAME.max_approval.
const maxApprovals = `"once", "1h", "8h" or "7d"`

// valueWording rewords CUE's refusal of a value (a pattern's bound, a
// type) as what the key needs and how to write it. The value of a
// token_sha256 is never repeated: it may be the token itself.
func valueWording(d *compiler.Diagnostic) {
	key := d.Path[strings.LastIndex(d.Path, ".")+1:]
	if i := strings.IndexByte(key, '['); i >= 0 {
		key = key[:i]
	}
	if value, bound, ok := d.CUE.OutOfBound(); ok {
		v, err := strconv.Unquote(value)
		if err != nil {
			return
		}
		switch bound {
		case boundSHA256:
			d.Message, d.Suggestion = tokenHashWording(d.Path, v)
		case boundURL:
			// A URL may carry a password: it is not repeated.
			v = withoutUserinfo(v)
			d.Message = fmt.Sprintf("%s: %q must start with http:// or https://", d.Path, v)
			d.Suggestion = "the gateway speaks HTTP: give an http:// or https:// URL"
			if !strings.Contains(v, "://") {
				d.Suggestion = fmt.Sprintf("write %s: %q", key, "https://"+v)
			}
		case boundEnvName:
			if strings.HasSuffix(d.Path, "]") {
				key = ""
			}
			d.Message, d.Suggestion = envNameWording(d.Path, key, v)
		case boundNonEmpty:
			d.Message = fmt.Sprintf("%s: an empty string is not a value here", d.Path)
			// The schema's non-empty strings: two required, the rest
			// optional.
			switch key {
			case "state_dir":
				d.Suggestion = `give an existing directory, e.g. state_dir: "/var/lib/policyc/state": the gateway keeps the serial of the last table it accepted there, so that no restart or reload goes back to an older table`
			case "client_id":
				d.Suggestion = "give the client id the provider registered for the approvals page's sign-in"
			default:
				d.Suggestion = fmt.Sprintf("write a value, or leave %s out for its default", key)
			}
		}
		return
	}
	if m := badNameRE.FindStringSubmatch(strings.TrimPrefix(d.Message, d.Path+": ")); m != nil && strings.HasPrefix(d.Path, "upstreams.") {
		// An env key is a variable's name, not a policy name.
		if v, err := strconv.Unquote(m[1]); err == nil && strings.HasSuffix(d.Path, ".env."+v) {
			d.Message, d.Suggestion = envNameWording(d.Path, "", v)
		}
		return
	}
	values, kinds, ok := d.CUE.Mismatch()
	if !ok {
		return
	}
	// One side is the schema's (a kind, a list or pattern type); the
	// other is the value written.
	schemaSide := func(s, kind string) bool {
		return s == kind || strings.HasPrefix(s, "[...") || strings.HasPrefix(s, "=~") || strings.HasPrefix(s, "#")
	}
	given, givenKind, want := values[0], kinds[0], kinds[1]
	if schemaSide(values[0], kinds[0]) {
		given, givenKind, want = values[1], kinds[1], kinds[0]
	}
	switch givenKind {
	case "list", "struct":
		given = "a " + givenKind
	}
	if key == "token_sha256" && givenKind == "string" {
		given = "a string"
	}
	switch {
	case key == "max_approval":
		if strings.HasPrefix(given, `"`) {
			return // the compiler lists the allowed values
		}
		d.Message = fmt.Sprintf("%s: one of %s is required, not %s", d.Path, maxApprovals, given)
		d.Suggestion = `write it in quotes, e.g. max_approval: "8h"`
	case want == "bool":
		d.Message = fmt.Sprintf("%s: true or false is required, not %s", d.Path, given)
		d.Suggestion = fmt.Sprintf("write %s: true or %s: false, without quotes", key, key)
		if given == `"true"` || given == `"false"` {
			d.Suggestion = fmt.Sprintf("write %s: %s, without quotes", key, strings.Trim(given, `"`))
		}
	case want == "string":
		d.Message = fmt.Sprintf("%s: a string in double quotes is required, not %s", d.Path, given)
		switch key {
		case "url", "public_url":
			d.Message = fmt.Sprintf("%s: an http:// or https:// URL in double quotes is required, not %s", d.Path, given)
			d.Suggestion = fmt.Sprintf(`for example %s: "https://gateway.internal:8443"`, key)
		case "address":
			d.Message = fmt.Sprintf("%s: host:port in double quotes is required, not %s", d.Path, given)
			d.Suggestion = `for example address: "127.0.0.1:8443"`
			if strings.HasPrefix(d.Path, "front.") {
				d.Suggestion = `for example address: "127.0.0.1:8080"`
			}
		default:
			// An env value is a string like any other, and may be a
			// secret: its kind is named, never the value.
			if strings.Contains(d.Path, ".env.") {
				d.Message = fmt.Sprintf("%s: a string in double quotes is required, not %s", d.Path, compiler.KindName(givenKind))
				if givenKind != "list" && givenKind != "struct" {
					d.Suggestion = fmt.Sprintf("write the value in double quotes, as written: %s: \"...\" (an environment value may be a secret, so it is not repeated here)", key)
				}
			}
		}
	case want == "list":
		d.Message = fmt.Sprintf("%s: a list in brackets is required, not %s", d.Path, given)
		v, err := strconv.Unquote(given)
		switch {
		case key == "token_sha256":
			d.Suggestion = `write it in brackets: token_sha256: ["<64 hex digits>", ...]`
		case err != nil:
		case key == "command":
			d.Suggestion = fmt.Sprintf("write the program and each argument as an element: command: %s", quotedList(strings.Fields(v)))
		default:
			d.Suggestion = fmt.Sprintf("write it in brackets: %s: %s", key, quotedList([]string{v}))
		}
	}
}

// tokenHashWording says why a token_sha256 is refused, without repeating
// it, and how to compute one.
func tokenHashWording(path, v string) (msg, suggestion string) {
	const how = `compute it with: printf %s "$TOKEN" | sha256sum (the 64 digits before " -"); the token itself is never written in the configuration`
	hex := v != "" && strings.Trim(strings.ToLower(v), "0123456789abcdef") == ""
	switch {
	case hex && len(v) == 64:
		// Uppercase is refused rather than folded: the hash is compared
		// as written, and a hash is one spelling everywhere.
		return path + ": a token hash is written in lowercase hex; this one has uppercase letters", "write it in lowercase, as sha256sum prints it"
	case hex:
		return fmt.Sprintf("%s: not the hex SHA-256 of a token: it has %d hex digits, a SHA-256 has 64", path, len(v)), how
	}
	return path + ": not the hex SHA-256 of a token (64 lowercase hex digits); the token itself, or a placeholder, is refused", how
}

// envNameWording says why v is not the name of an environment variable,
// and suggests the name it may mean. key is the key to write it under,
// "" for a list element or an env key.
func envNameWording(path, key, v string) (msg, suggestion string) {
	// The value is never repeated: what was written where a variable's
	// name belongs is often the secret the variable should hold.
	msg = fmt.Sprintf("%s: not the name of an environment variable (letters, digits and '_', not starting with a digit)", path)
	written := func(name string) string { // how to write it, under key when there is one
		if key == "" {
			return strconv.Quote(name)
		}
		return key + ": " + strconv.Quote(name)
	}
	if name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(v, "$"), "{"), "}"); strings.HasPrefix(v, "$") && validEnvName(name) {
		return msg, "give the variable's name, without $: " + written(name)
	}
	// A name in capitals with a '-' or '.' for a '_' is a misspelt name;
	// anything else may be a value, and nothing is built from it.
	if upperName.MatchString(v) {
		return msg, "for example " + written(strings.NewReplacer("-", "_", ".", "_").Replace(v))
	}
	return msg, "if this is the secret itself, move it to the gateway's environment and give the variable's name here (and rotate it if this file is shared)"
}

var upperName = regexp.MustCompile(`^[A-Z][A-Z0-9_.-]{0,31}$`)

// varName is how an error names the variable a *_env key gives: by its
// name when that is written as variables' names are (capitals, digits and
// '_'), else "the variable it names". A valid name can still be a secret
// pasted in by mistake (ghp_..., whsec_...), and an error must not print
// one.
func varName(v string) string {
	if conventionalName.MatchString(v) {
		return v
	}
	return "the variable it names"
}

var conventionalName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

func validEnvName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// quotedList writes strings as a CUE list.
func quotedList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// withoutUserinfo is URL u with any user name and password before its host
// replaced by "…", so that a message can quote it.
func withoutUserinfo(u string) string {
	rest, scheme := u, ""
	if i := strings.Index(u, "://"); i >= 0 {
		scheme, rest = u[:i+3], u[i+3:]
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		return scheme + "…" + rest[at:]
	}
	return u
}
