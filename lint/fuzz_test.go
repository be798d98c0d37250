package lint

import (
	"bytes"
	"errors"
	"testing"

	"github.com/policyc/policyc/compiler"
)

// FuzzIgnores feeds arbitrary policy bytes to the ignore-comment parser.
// Invariants: every ignore it accepts names a rule that can be ignored and
// gives a reason, and silences a line at or after its own that exists in the
// file (or the one just past it); every malformed one is reported at a
// position inside the file.
func FuzzIgnores(f *testing.F) {
	f.Add([]byte("package policy\n\n// policyc:ignore redundant-deny a guard\nx: 1\n"))
	f.Add([]byte("a: [\n\t\"x\", // policyc:ignore duplicate-pattern reason\n]\n"))
	f.Add([]byte("// policyc:ignore\n// policyc:ignore nosuch-rule why\n// policyc:ignore invalid-glob why\n"))
	f.Add([]byte("s: \"// policyc:ignore shadowed-rule in a string\"\n"))
	f.Add([]byte("// policyc:ignore shadowed-rule at the end"))
	f.Fuzz(func(t *testing.T, data []byte) {
		igs, bad := parseIgnores(compiler.File{Name: "f.cue", Data: data})
		lines := bytes.Count(data, []byte("\n")) + 1
		for _, ig := range igs {
			if _, ok := compiler.LookupCode(ig.id); !ok || Fixed(ig.id) || ig.reason == "" {
				t.Fatalf("accepted ignore %+v", ig)
			}
			if ig.pos.Line < 1 || ig.pos.Line > lines || ig.line < ig.pos.Line || ig.line > lines+1 {
				t.Fatalf("ignore at line %d silences line %d of %d", ig.pos.Line, ig.line, lines)
			}
		}
		for _, d := range bad {
			if d.Code != compiler.CodeInvalidIgnore || d.Pos.Line < 1 || d.Pos.Line > lines {
				t.Fatalf("bad report %+v", d)
			}
		}
	})
}

// FuzzConfig feeds arbitrary bytes to the configuration reader. Invariant:
// it returns a usable configuration, or a ConfigError that says why (at
// least one diagnostic), never a half-read configuration.
func FuzzConfig(f *testing.F) {
	f.Add([]byte("package policyc\n\nfail_level: \"warning\"\n"))
	f.Add([]byte("package policyc\n\nrules: \"shadowed-rule\": level: \"off\"\n"))
	f.Add([]byte("package policyc\n\nrules: \"type-error\": level: \"info\"\n"))
	f.Add([]byte("package policyc\n\nignore_files: [\"[a-\"]\n"))
	f.Add([]byte("package policyc\n\nrules: \"approval-timeout-too-long\": max_seconds: 90\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(compiler.File{Name: "policyc.cue", Data: data})
		if err != nil {
			var ce *ConfigError
			if cfg != nil || !errors.As(err, &ce) || len(ce.Diagnostics) == 0 || !compiler.HasErrors(ce.Diagnostics) {
				t.Fatalf("config %v, error %v", cfg, err)
			}
			return
		}
		if cfg.MaxApprovalTimeout <= 0 || cfg.FailLevel < compiler.Warning {
			t.Fatalf("config %+v", cfg)
		}
		for id, rc := range cfg.Rules {
			if Fixed(id) && rc.Set && rc.Level != LevelOf(compiler.Error) {
				t.Fatalf("a fixed rule was lowered: %s %v", id, rc.Level)
			}
		}
	})
}
