package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/policyc/policyc/compiler"
)

// The flags several commands share, defined once so that each is spelt,
// shown and checked the same way everywhere. A value's placeholder in
// help is the word in backquotes in its usage (FILE, FORMAT, DURATION).

// addOutputFlag adds -o/--output FILE, the file a command writes (what
// says what it holds and how "-" or no flag is read).
func addOutputFlag(fs *pflag.FlagSet, p *string, def, what string) {
	fs.StringVarP(p, "output", "o", def, "write "+what)
}

// addFormatFlag adds --format FORMAT, one of formats, the first the
// default.
func addFormatFlag(fs *pflag.FlagSet, p *string, formats ...string) {
	fs.StringVar(p, "format", formats[0], "print in `FORMAT`: "+orList(formats))
}

// writeJSON prints v as --format json does everywhere: indented, one
// value, with <, > and & as themselves.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// checkFormat refuses a --format that is not one of formats.
func checkFormat(format string, formats ...string) error {
	return checkChoice("format", format, formats...)
}

// checkChoice refuses a value of --flag that is none of choices, with the
// one it likely misspells (--kind tools: tool).
func checkChoice(flag, value string, choices ...string) error {
	if slices.Contains(choices, value) {
		return nil
	}
	if near := compiler.Suggest(value, choices); near != "" {
		return usageErrorf("--%s must be %s, got %q: did you mean %s?", flag, orList(choices), value, near)
	}
	return usageErrorf("--%s must be %s, got %q", flag, orList(choices), value)
}

// orList writes "a, b or c".
func orList(ss []string) string {
	if len(ss) < 2 {
		return strings.Join(ss, "")
	}
	return strings.Join(ss[:len(ss)-1], ", ") + " or " + ss[len(ss)-1]
}

// checkUsage is the meaning --check has on every command that has it:
// the command does everything but its effect, and reports.
const checkUsage = "check only: write nothing and serve nothing; report, and exit non-zero when the check fails ("

// addCheckFlag adds --check; fails says when the check fails, and with
// which exit code.
func addCheckFlag(fs *pflag.FlagSet, p *bool, fails string) {
	fs.BoolVar(p, "check", false, checkUsage+fails+")")
}

// addTrustFlag adds --trust FILE (repeatable); instead says what it
// replaces, if anything.
func addTrustFlag(fs *pflag.FlagSet, p *[]string, instead string) {
	fs.StringArrayVar(p, "trust", nil, "trust tables signed by the Ed25519 public key in `FILE`"+instead+" (repeatable)")
}

// deprecatedAnnotation marks a flag kept under its old spelling; its value
// is what to use instead.
const deprecatedAnnotation = "policyc-deprecated"

// deprecate keeps an old spelling of a flag working for one release: it is
// hidden from help and, when used, a note on standard error names the new
// spelling (noteDeprecated). pflag's MarkDeprecated is not used: cobra
// prints its note on the command's standard output, where it would end up
// in JSON output or in KEYID=$(policyc keygen ...) (cobra v1.10.2;
// TestCobraPrintsDeprecationsOnStdout fails when that changes).
func deprecate(fs *pflag.FlagSet, old, use string) {
	if err := fs.MarkHidden(old); err != nil {
		panic(err) // a flag that does not exist: a bug here
	}
	if err := fs.SetAnnotation(old, deprecatedAnnotation, []string{use}); err != nil {
		panic(err)
	}
}

// noteDeprecated prints a note for each old spelling of a flag that was
// used.
func noteDeprecated(fs *pflag.FlagSet, stderr io.Writer) {
	fs.Visit(func(f *pflag.Flag) {
		if use, ok := f.Annotations[deprecatedAnnotation]; ok {
			fmt.Fprintf(stderr, "policyc: note: --%s is deprecated and goes in the next release: use %s instead\n", f.Name, use[0])
		}
	})
}

// jsonFlag is the old --json of a command that now has --format: --json
// is --format json.
type jsonFlag struct{ format *string }

func (j jsonFlag) String() string { return "false" }
func (j jsonFlag) Type() string   { return "bool" }

func (j jsonFlag) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if on {
		*j.format = "json"
	}
	return err
}

// addOldJSONFlag adds --json as the deprecated spelling of --format json.
func addOldJSONFlag(fs *pflag.FlagSet, format *string) {
	fs.VarPF(jsonFlag{format}, "json", "", "print JSON").NoOptDefVal = "true"
	deprecate(fs, "json", "--format json")
}
