// Package config reads a gateway configuration (CUE in package gateway,
// checked against the schema's #Gateway) into the typed configuration the
// gateway starts with, and reports every problem it finds as a positioned
// compiler.Diagnostic with the code gateway-config. It never starts
// anything, never reads the signed table and never prints: the command
// decides what to do with the configuration and how to show its problems.
package config

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/envelope"
	"github.com/policyc/policyc/runtime/gateway"
	"github.com/policyc/policyc/runtime/gateway/identity"
)

// Package is the CUE package of gateway configuration files.
const Package = "gateway"

// Use is what a gateway configuration is read for.
type Use int

const (
	// ForGateway: running the gateway, or checking that it would start.
	ForGateway Use = iota
	// ForPull: catalog pull, which starts the upstreams and nothing else.
	// The configuration is checked all the same, but the files and secrets
	// only the running gateway uses (trust keys, table, state directory,
	// decision log, webhook secret) need not be there.
	ForPull
)

// environment is how problems with the environment an upstream needs are
// worded: where the variable is missing, and when to export it.
func (u Use) environment() (where, when string) {
	if u == ForPull {
		return "the environment", "export it before pulling"
	}
	return "the gateway's environment", "export it before starting the gateway"
}

// Options say what the configuration is read for and which of its keys
// the caller replaces (the command's flags).
type Options struct {
	Use Use
	// Probe also checks that a decision log that does not exist yet could
	// be created (with a temporary file, removed at once), as a check
	// before a start wants.
	Probe bool
	// Table and StateDir, when set, replace the configuration's table and
	// state_dir.
	Table, StateDir string
	// DecisionLog, when set, replaces decision_log ("-": standard error).
	// A file the gateway could not append to is an *OverrideError.
	DecisionLog string
	// Trust, when set, gives the trusted keys instead of the
	// configuration's trust, whose files are then not read. Its error is
	// returned as it is.
	Trust func() ([]ed25519.PublicKey, error)
}

// OverrideError is a replacement given in Options that cannot be used.
type OverrideError struct {
	// Key is the configuration key the replacement is for.
	Key string
	Err error
}

func (e *OverrideError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *OverrideError) Unwrap() error { return e.Err }

// Config is a checked configuration, ready to start.
type Config struct {
	// Gateway has the upstreams, timeouts and version filled in; the
	// caller adds the logs, the table loader and the approval gate.
	Gateway gateway.Config
	// Table is the signed table's path; Trust the keys it must be signed
	// by; StateDir where the last accepted serial is kept.
	Table    string
	Trust    []ed25519.PublicKey
	StateDir string
	// TablePos is where the configuration sets table (relative to the
	// configuration's directory); zero when Options.Table replaced it.
	TablePos compiler.Position
	// DecisionLog is the decision log's path, "" for standard error.
	// DecisionLogOverridden says it came from Options.DecisionLog; else
	// decisionLogPos is where the configuration sets it.
	DecisionLog           string
	DecisionLogOverridden bool
	decisionLogPos        compiler.Position
	// Principal is the stdio front's principal; Address and HTTP the HTTP
	// front's, when Address is set.
	Principal string
	Address   string
	HTTP      gateway.HTTPOptions
	// OAuth configures the verifier of the HTTP front's access tokens
	// (front.http.oauth), nil without one; OAuthScopes are the scopes
	// every token must carry. The command makes the verifier, which
	// fetches the issuers' keys, and sets HTTP.OAuth.
	OAuth       *identity.Config
	OAuthScopes []string
	// issuerPos is where each issuer is configured, by name.
	issuerPos map[string]compiler.Position
	// Kinds describes each upstream: "stdio: npx" or "http: URL" (without
	// credentials).
	Kinds map[string]string
	// Approvals is the approval gate's configuration (StateDir is filled
	// in when it opens), nil without an approvals block; AdminAddress and
	// Admin its admin listener's, when AdminAddress is set.
	Approvals    *approval.Config
	AdminAddress string
	Admin        approval.AdminOptions
	// State is where replicas share their state (state.postgres), nil
	// when the state is state_dir's alone.
	State *State
	// Observe is the observe block's metrics and traces.
	Observe Observe
	// AdminOAuth configures approvers from an identity provider
	// (approvals.admin.oauth), nil without one. The command makes
	// Admin.OAuth from it (approval.NewAdminOAuth), which fetches the
	// provider's keys.
	AdminOAuth    *approval.AdminOAuthConfig
	adminOAuthPos compiler.Position
}

// DecisionLogDiagnostic is the problem of a decision log from the
// configuration that could not be opened when the gateway started.
func (c *Config) DecisionLogDiagnostic(err error) compiler.Diagnostic {
	return compiler.Diagnostic{Pos: c.decisionLogPos, Code: compiler.CodeGatewayConfig, Severity: compiler.Error,
		Path: "decision_log", Message: fmt.Sprintf("decision_log: cannot open %s: %v", c.DecisionLog, unwrapPath(err)),
		Suggestion: decisionLogHint}
}

// stateDirHint says how to make the state directory the gateway needs.
func stateDirHint(dir string) string {
	return fmt.Sprintf("create it (mkdir -p %s): the gateway keeps the serial of the last table it accepted there, so that no restart or reload goes back to an older table; a relative path is relative to the configuration's directory", dir)
}

const decisionLogHint = `give a file in an existing directory the gateway may write to, or "-" for standard error`

// ReadFiles reads a configuration directory's .cue files, or one file,
// and returns them with the directory positions are relative to.
func ReadFiles(path string) ([]compiler.File, string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, "", err
	}
	if !st.IsDir() {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", err
		}
		return []compiler.File{{Name: filepath.Base(path), Data: b}}, filepath.Dir(path), nil
	}
	files, err := compiler.ReadDir(path)
	if err != nil {
		return nil, "", err
	}
	if len(files) == 0 {
		return nil, "", fmt.Errorf("no .cue files in %s (the configuration is CUE in package %s; see docs/gateway.md)", path, Package)
	}
	return files, path, nil
}

// reader checks one configuration, collecting its problems.
type reader struct {
	o     Options
	ev    *compiler.Evaluation
	dir   string
	file  gatewayFile
	c     *Config
	diags []compiler.Diagnostic
	// brokenKeys are the keys the schema refused.
	brokenKeys map[string]bool
}

// Check checks the configuration files (read by ReadFiles from dir) and
// everything they point at. With problems, it returns all of them, sorted,
// and no configuration. An error is a configuration that could not be
// read at all, or a replacement from o that cannot be used.
func Check(files []compiler.File, dir string, o Options) (*Config, []compiler.Diagnostic, error) {
	ev := compiler.Evaluate(files, Package, "#Gateway")
	var schema []compiler.Diagnostic
	refused := compiler.HasErrors(ev.Diagnostics)
	optional := o.optional()
	ev.Diagnostics = slices.DeleteFunc(ev.Diagnostics, func(d compiler.Diagnostic) bool {
		return optional[d.Path] && d.CUE.Required()
	})
	if compiler.HasErrors(ev.Diagnostics) && ev.Value.Exists() {
		// CUE leaves required keys unchecked beside a refused value: they
		// are looked for here, so that they are not a second run's news.
		reported := map[string]bool{}
		for _, d := range ev.Diagnostics {
			reported[d.Path] = true
		}
		inReported := func(key string) bool {
			for p := range reported {
				if p == key || under(key, p) {
					return true
				}
			}
			return false
		}
		for _, key := range missingRequired(ev.Value, inReported) {
			if optional[key] {
				continue
			}
			d := compiler.Diagnostic{Code: compiler.CodeGatewayConfig, Severity: compiler.Error, Path: key}
			requiredWording(&d, ev, files)
			ev.Diagnostics = append(ev.Diagnostics, d)
		}
	}
	if compiler.HasErrors(ev.Diagnostics) {
		// The policy codes (unknown-key, type-error, ...) and their pages
		// speak of policy files; here they are the configuration's.
		for i := range ev.Diagnostics {
			d := &ev.Diagnostics[i]
			d.Code = compiler.CodeGatewayConfig
			if d.CUE.Required() {
				requiredWording(d, ev, files)
				continue
			}
			// The first wording that rewrites CUE's message has the last
			// word: what it wrote is no longer CUE's.
			for _, word := range []func(*compiler.Diagnostic){
				func(d *compiler.Diagnostic) { wholeUnits(d, ev.Value) }, valueWording, oauthWording,
			} {
				msg := d.Message
				if word(d); d.Message != msg {
					d.CUE = nil
					break
				}
			}
		}
		// A value refused by each branch of an enum is one problem, now
		// worded once.
		compiler.SortDiagnostics(ev.Diagnostics)
		schema = slices.CompactFunc(ev.Diagnostics, func(a, b compiler.Diagnostic) bool {
			return a.Pos == b.Pos && a.Message == b.Message
		})
		if !ev.Value.Exists() || slices.ContainsFunc(schema, func(d compiler.Diagnostic) bool { return d.Path == "" }) {
			// Nothing evaluated, or a problem that is not at a key:
			// the checks below would have nothing sound to read.
			return nil, schema, nil
		}
	}
	// The checks below run even when the schema found problems, on the
	// keys it found none in, so that every problem is reported at once.
	// What is read then is never used: the problems are returned. (A pull
	// missing only the keys it does without is read key by key too.)
	r := &reader{o: o, ev: ev, dir: dir, brokenKeys: map[string]bool{}, c: &Config{Kinds: map[string]string{}}}
	for _, d := range schema {
		r.brokenKeys[d.Path] = true
	}
	if !refused {
		if err := ev.Value.Decode(&r.file); err != nil {
			return nil, nil, fmt.Errorf("decode the gateway configuration: %v", err)
		}
	} else {
		r.file = decodeSound(ev.Value, r.broken, r.brokenKeys)
	}
	if err := r.files(); err != nil {
		return nil, nil, err
	}
	r.upstreams()
	r.front()
	r.approvals()
	r.state()
	r.observe()
	c := r.c
	c.Gateway.CallTimeout = time.Duration(r.file.CallTimeoutSeconds) * time.Second
	c.Gateway.ConnectTimeout = time.Duration(r.file.ConnectTimeoutSeconds) * time.Second
	c.Gateway.Version = compiler.Version
	if len(schema) > 0 || len(r.diags) > 0 {
		all := append(schema, r.diags...)
		compiler.SortDiagnostics(all)
		return nil, all, nil
	}
	return c, nil, nil
}

// pullOptional are the required keys a pull does without: they name what
// only the running gateway uses (the table, its keys, the state directory,
// the front clients connect to).
var pullOptional = map[string]bool{"table": true, "trust": true, "state_dir": true, "front": true}

// optional are the required keys the configuration need not set: those
// a pull does without, and those the caller replaces (the command's
// --table, --trust and --state set them).
func (o Options) optional() map[string]bool {
	if o.Use == ForPull {
		return pullOptional
	}
	return map[string]bool{"table": o.Table != "", "trust": o.Trust != nil, "state_dir": o.StateDir != ""}
}

// broken says whether the schema found a problem at key, inside it, or at
// a key that holds it.
func (r *reader) broken(key string) bool {
	for b := range r.brokenKeys {
		if b == key || under(b, key) || under(key, b) {
			return true
		}
	}
	return false
}

// brokenAbove says whether the schema refused key itself or a key that
// holds it; a problem inside key does not count.
func (r *reader) brokenAbove(key string) bool {
	for b := range r.brokenKeys {
		if b == key || under(key, b) {
			return true
		}
	}
	return false
}

// bad reports a problem at key, unless the schema already did there.
func (r *reader) bad(key, msg, suggestion string) {
	if r.broken(key) {
		return // reported by the schema, or read from a key it refused
	}
	r.report(key, msg, suggestion)
}

// badShape reports a problem with which keys are set at key (both of two
// that exclude each other, a name that refers to nothing), unless the
// schema refused key or a key that holds it. A refused value inside key
// does not hide it: which keys are there is known all the same.
func (r *reader) badShape(key, msg, suggestion string) {
	if r.brokenAbove(key) {
		return
	}
	r.report(key, msg, suggestion)
}

func (r *reader) report(key, msg, suggestion string) {
	r.diags = append(r.diags, compiler.Diagnostic{Pos: r.ev.KeyPos(key), Code: compiler.CodeGatewayConfig, Severity: compiler.Error,
		Path: key, Message: key + ": " + msg, Suggestion: suggestion})
}

// set says whether the configuration as written sets the dotted key
// (whatever the schema thought of its value).
func (r *reader) set(key string) bool {
	var sels []cue.Selector
	for _, k := range strings.Split(key, ".") {
		sels = append(sels, cue.Str(k))
	}
	return r.ev.Value.LookupPath(cue.MakePath(sels...)).Exists()
}

// abs is p relative to the configuration's directory.
func (r *reader) abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.dir, p)
}

// files reads the keys that name files: the table, the state directory,
// the decision log and the trusted keys.
func (r *reader) files() error {
	o, c, file := r.o, r.c, r.file
	c.Table, c.StateDir = r.abs(file.Table), r.abs(file.StateDir)
	switch {
	case o.DecisionLog != "":
		if o.DecisionLog != "-" {
			c.DecisionLog = o.DecisionLog
			c.DecisionLogOverridden = true
			if o.Use == ForGateway {
				if err := checkDecisionLog(c.DecisionLog, o.Probe); err != nil {
					return &OverrideError{Key: "decision_log", Err: err}
				}
			}
		}
	case file.DecisionLog != "" && file.DecisionLog != "-":
		c.DecisionLog = r.abs(file.DecisionLog)
		c.decisionLogPos = r.ev.KeyPos("decision_log")
		if o.Use == ForGateway {
			if err := checkDecisionLog(c.DecisionLog, o.Probe); err != nil {
				r.bad("decision_log", err.Error(), decisionLogHint)
			}
		}
	}
	if o.Table != "" {
		c.Table = o.Table
	} else {
		c.TablePos = r.ev.KeyPos("table")
	}
	if o.StateDir != "" {
		c.StateDir = o.StateDir
	}
	if o.Use == ForGateway {
		switch err := checkStateDir(c.StateDir, o.Probe); {
		case err == nil:
		case o.StateDir != "":
			return &OverrideError{Key: "state_dir", Err: err}
		default:
			hint := stateDirHint(c.StateDir)
			var nw *notWritableError
			if errors.As(err, &nw) {
				hint = "let the gateway's user write to it (chown or chmod): the gateway keeps the last accepted table there, and the approval gate its lock"
			}
			r.bad("state_dir", err.Error(), hint)
		}
	}
	switch {
	case o.Trust != nil:
		keys, err := o.Trust()
		if err != nil {
			return err
		}
		c.Trust = keys
	case o.Use == ForPull:
		// The keys verify the table, which a pull never reads.
	case len(file.Trust) == 0:
		r.bad("trust", "no public key: the gateway loads only a table signed by a trusted key", `list the public key CI signs with, e.g. trust: ["ci.pub"] (written by 'policyc keygen')`)
	default:
		for i, p := range file.Trust {
			b, err := os.ReadFile(r.abs(p))
			if err != nil {
				r.bad("trust", fmt.Sprintf("key %d: %v", i+1, err), "give the path of a public key written by 'policyc keygen' (relative to the configuration)")
				continue
			}
			k, err := envelope.ParsePublicKey(b)
			if err != nil {
				r.bad("trust", fmt.Sprintf("key %d: %s: %v", i+1, p, err), "give the path of a public key written by 'policyc keygen' (the .pub file)")
				continue
			}
			c.Trust = append(c.Trust, k)
		}
	}
	return nil
}

// requiredWording words d, a required key the configuration does not set.
// A missing key has no position of its own: it is given the file's, or
// its parent's.
func requiredWording(d *compiler.Diagnostic, ev *compiler.Evaluation, files []compiler.File) {
	d.Message = d.Path + ": required, and not set"
	d.Suggestion = "add " + d.Path + " (docs/gateway.md, Configuration, lists every key)"
	d.CUE = nil
	if d.Pos.File == "" {
		d.Pos = missingKeyPos(ev, d.Path, files)
	}
}

// missingKeyPos is where to report the missing key dotted: the nearest
// enclosing key that is set, else the one file, else the directory of
// files.
func missingKeyPos(ev *compiler.Evaluation, dotted string, files []compiler.File) compiler.Position {
	for p := dotted; ; {
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
		if pos := ev.KeyPos(p); pos.File != "" {
			return pos
		}
	}
	if len(files) == 1 {
		return compiler.Position{File: files[0].Name}
	}
	return compiler.Position{File: "."}
}
