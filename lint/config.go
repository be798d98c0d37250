package lint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"cuelang.org/go/cue"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/glob"
)

// ConfigPackage is the CUE package of the lint configuration file.
const ConfigPackage = "policyc"

// Level is the level a rule reports at: a severity, or Off.
type Level int

// Off drops a rule's findings. The other levels are compiler severities.
const Off Level = -1

// LevelOf is the level of a severity.
func LevelOf(s compiler.Severity) Level { return Level(s) }

func (l Level) String() string {
	if l == Off {
		return "off"
	}
	return compiler.Severity(l).String()
}

// ParseLevel reads "error", "warning", "info" or "off".
func ParseLevel(s string) (Level, bool) {
	if s == "off" {
		return Off, true
	}
	sev, ok := compiler.ParseSeverity(s)
	return Level(sev), ok
}

// Config is a lint configuration: what policyc.cue at the policy root says,
// over the defaults.
type Config struct {
	// File is where the configuration was read from; "" for the defaults.
	File string
	// FailLevel: a finding at this level or above fails the run.
	FailLevel compiler.Severity
	// IgnoreFiles are the files no finding is reported in.
	IgnoreFiles []FilePattern
	// Rules holds the per-rule settings, by rule id.
	Rules map[string]RuleConfig
	// MaxApprovalTimeout is the approval-timeout-too-long limit, seconds.
	MaxApprovalTimeout int
}

// RuleConfig is the configuration of one rule.
type RuleConfig struct {
	// Level overrides the rule's default level when Set.
	Level Level
	Set   bool
	// IgnoreFiles are the files the rule reports nothing in.
	IgnoreFiles []FilePattern
}

// FilePattern is a glob matched against a file name relative to the
// policy root.
type FilePattern struct {
	Text string
	glob *glob.Pattern
}

// Match reports whether the pattern matches a file name.
func (p FilePattern) Match(file string) bool { return p.glob.Match(file) }

// DefaultConfig is the configuration when there is no policyc.cue.
func DefaultConfig() *Config {
	return &Config{FailLevel: compiler.Error, Rules: map[string]RuleConfig{}, MaxApprovalTimeout: compiler.DefaultMaxApprovalTimeout}
}

// Level returns the level findings of a rule are reported at.
func (c *Config) Level(id string) Level {
	if rc, ok := c.Rules[id]; ok && rc.Set {
		return rc.Level
	}
	if info, ok := compiler.LookupCode(id); ok {
		return LevelOf(info.Level)
	}
	return LevelOf(compiler.Error)
}

// ignoresFile reports whether the configuration silences rule id in file.
func (c *Config) ignoresFile(id, file string) bool {
	for _, p := range c.IgnoreFiles {
		if p.Match(file) {
			return true
		}
	}
	for _, p := range c.Rules[id].IgnoreFiles {
		if p.Match(file) {
			return true
		}
	}
	return false
}

// Fixed reports whether a rule's level can never be lowered or its findings
// silenced: a rule whose default level is error stops compilation, and a
// policy that does not compile must never lint clean.
func Fixed(id string) bool {
	info, ok := compiler.LookupCode(id)
	return !ok || info.Level == compiler.Error
}

// ConfigError reports a lint configuration that cannot be used. The linter
// never falls back to defaults when the configuration is unreadable.
type ConfigError struct {
	// File is the configuration file as named by the caller.
	File string
	// Diagnostics are its problems, with positions in File; empty when it
	// could not be read at all (Err says why).
	Diagnostics []compiler.Diagnostic
	Err         error
}

func (e *ConfigError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("lint configuration %s: %v", e.File, e.Err)
	}
	n := len(e.Diagnostics)
	if n == 1 {
		return fmt.Sprintf("lint configuration %s is invalid (1 problem above); fix it or pass --config with another file", e.File)
	}
	return fmt.Sprintf("lint configuration %s is invalid (%d problems above); fix it or pass --config with another file", e.File, n)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// ReadConfig reads and checks the configuration file at path. Positions in
// its diagnostics name the file by its base name.
func ReadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("no such file (run `policyc init` to create one, or drop --config)")
		}
		return nil, &ConfigError{File: path, Err: err}
	}
	cfg, err := ParseConfig(compiler.File{Name: filepath.Base(path), Data: data})
	if ce, ok := err.(*ConfigError); ok {
		ce.File = path
	}
	return cfg, err
}

// ParseConfig checks a configuration file against the #LintConfig schema,
// as policies are checked against #Policy, and returns the configuration
// over the defaults.
func ParseConfig(f compiler.File) (*Config, error) {
	ev := compiler.Evaluate([]compiler.File{f}, ConfigPackage, "#LintConfig")
	// The checks below read what the schema accepted, so they run even
	// when it found problems elsewhere: every problem is reported at once.
	schema := dedupeUnknownKeys(ev.Diagnostics)
	if compiler.HasErrors(schema) && !ev.Value.Exists() { // nothing evaluated: the file did not even parse
		return nil, &ConfigError{File: f.Name, Diagnostics: schema}
	}
	cfg := DefaultConfig()
	cfg.File = f.Name
	var problems []compiler.Diagnostic
	badAt := func(pos compiler.Position, key, msg, suggestion string) {
		problems = append(problems, compiler.Diagnostic{Pos: pos, Code: compiler.CodeType, Severity: compiler.Error,
			Path: key, Message: key + ": " + msg, Suggestion: suggestion})
	}
	bad := func(key, msg, suggestion string) { badAt(ev.KeyPos(key), key, msg, suggestion) }
	v := ev.Value
	if s, err := v.LookupPath(cue.ParsePath("fail_level")).String(); err == nil {
		cfg.FailLevel, _ = compiler.ParseSeverity(s)
	}
	files := func(list cue.Value, key string) []FilePattern {
		it, err := list.List()
		if err != nil {
			return nil
		}
		var out []FilePattern
		for i := 0; it.Next(); i++ {
			s, _ := it.Value().String()
			g, err := glob.Parse(s)
			if err != nil {
				pos := ev.KeyPos(key)
				if p := it.Value().Pos(); p.IsValid() { // the entry itself
					pos = compiler.Position{File: p.Filename(), Line: p.Line(), Column: p.Column()}
				}
				badAt(pos, key, fmt.Sprintf("entry %d: %v", i, err), `write a glob such as "generated_*.cue"`)
				continue
			}
			out = append(out, FilePattern{Text: s, glob: g})
		}
		return out
	}
	cfg.IgnoreFiles = files(v.LookupPath(cue.ParsePath("ignore_files")), "ignore_files")
	rules := v.LookupPath(cue.ParsePath("rules"))
	for _, info := range compiler.Codes {
		r := rules.LookupPath(cue.MakePath(cue.Str(info.ID)))
		if !r.Exists() {
			continue
		}
		key := "rules." + info.ID
		var rc RuleConfig
		if s, err := r.LookupPath(cue.ParsePath("level")).String(); err == nil {
			rc.Level, _ = ParseLevel(s)
			rc.Set = true
			if Fixed(info.ID) && rc.Level != LevelOf(compiler.Error) {
				bad(key+".level", fmt.Sprintf("%s stops compilation; its level cannot be changed, so that a policy that does not compile never lints clean", info.ID),
					"remove the setting and fix the policy instead")
			}
		}
		if l := r.LookupPath(cue.ParsePath("ignore_files")); l.Exists() {
			rc.IgnoreFiles = files(l, key+".ignore_files")
			if Fixed(info.ID) {
				bad(key+".ignore_files", fmt.Sprintf("%s stops compilation; it cannot be ignored in any file", info.ID),
					"remove the setting and fix the policy instead")
			}
		}
		if n, err := r.LookupPath(cue.ParsePath("max_seconds")).Int64(); err == nil {
			cfg.MaxApprovalTimeout = int(n)
		}
		cfg.Rules[info.ID] = rc
	}
	if compiler.HasErrors(schema) || len(problems) > 0 {
		all := append(schema, problems...)
		compiler.SortDiagnostics(all)
		return nil, &ConfigError{File: f.Name, Diagnostics: all}
	}
	return cfg, nil
}

// dedupeUnknownKeys drops the "key not allowed here" follow-ups of an
// unknown key already reported with a suggestion: CUE quotes rule ids in
// its paths (rules."shadowed-rul"), the key check does not.
func dedupeUnknownKeys(ds []compiler.Diagnostic) []compiler.Diagnostic {
	unquote := func(p string) string { return strings.ReplaceAll(p, `"`, "") }
	reported := map[string]bool{}
	for _, d := range ds {
		if d.Code == compiler.CodeUnknownKey && !strings.HasSuffix(d.Message, "key not allowed here") {
			reported[unquote(d.Path)] = true
		}
	}
	var out []compiler.Diagnostic
	for _, d := range ds {
		if d.Code == compiler.CodeUnknownKey && strings.HasSuffix(d.Message, "key not allowed here") {
			p, dup := unquote(d.Path), false
			for k := range reported {
				dup = dup || p == k || strings.HasPrefix(p, k+".")
			}
			if dup {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}
