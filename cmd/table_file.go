package cmd

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/envelope"
	"github.com/policyc/policyc/runtime/table"
)

// tableReader reads the decision table a command inspects (explain,
// export, diff): a bare table as 'policyc compile' writes it, or a signed
// envelope as 'policyc sign' writes it. With --trust, only a signed table
// is read, and only once it verifies as 'policyc verify' verifies it
// (without a rollback state); without it, an envelope's table is read
// unverified, and a note on standard error says so.
type tableReader struct {
	trust  []string
	stderr io.Writer
}

// addFlags adds --trust to a command that reads tables.
func (r *tableReader) addFlags(fs *pflag.FlagSet) {
	addTrustFlag(fs, &r.trust, ": a table file must then be signed by it, and is read only once its signature verifies")
}

// read reads the table in path. A refusal carries verify's exit code; a
// file that is not a table is a plain error, for the caller to word.
func (r *tableReader) read(path string) (*table.Table, error) {
	if len(r.trust) > 0 {
		keys, _, err := readTrustedKeys(r.trust)
		if err != nil {
			return nil, err
		}
		b, err := envelope.ReadFile(path)
		if errors.Is(err, envelope.ErrTooLarge) {
			return nil, verifyError(path, fmt.Errorf("%w: %w", decide.ErrBadSignature, err))
		}
		if err != nil {
			return nil, failuref("%v", err)
		}
		t, _, err := decide.LoadVerified(b, decide.VerifyOptions{Trusted: keys})
		if err != nil {
			return nil, verifyError(path, err)
		}
		return t.Source(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, failuref("%v", err)
	}
	t, err := table.Decode(b)
	var fe *table.FormatError
	if !errors.As(err, &fe) || !fe.Envelope {
		return t, err
	}
	env, err := envelope.Parse(b)
	if err != nil {
		return nil, verifyError(path, fmt.Errorf("%w: %w", decide.ErrBadSignature, err))
	}
	if env.PayloadType != table.PayloadType {
		code := ExitWrongType
		if strings.HasPrefix(env.PayloadType, table.PayloadType[:strings.Index(table.PayloadType, ".table.")+len(".table.")]) {
			code = ExitUnknownFormat
		}
		return nil, withCode(code, fmt.Errorf("%s refused: payloadType %q is not a decision table this build reads (%q)", path, env.PayloadType, table.PayloadType))
	}
	fmt.Fprintf(r.stderr, "policyc: note: %s is a signed table, read without checking its signatures (give --trust KEY.pub to verify them as a gateway does)\n", path)
	return table.Decode(env.Payload)
}

// tableFileError words an error of read: a refusal as it is, a file that
// is not a table as a failure naming it, with what the command reads.
func tableFileError(path string, err error, reads string) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	if reads != "" {
		return failuref("%s: %v (%s)", path, err, reads)
	}
	return failuref("%s: %v", path, err)
}

// notePrincipal says on standard error when principal is not named by the
// table (no principal scope, in no group) while a name it does know is
// close to it: the decisions are then those of anyone without a scope of
// their own, which a misspelt name should not get silently.
func notePrincipal(w io.Writer, src *table.Table, principal string) {
	if near := nearPrincipal(src, principal); near != "" {
		fmt.Fprintf(w, "policyc: note: principal %q is in no group and has no scope of its own, so it is decided as anyone without one; did you mean %q?\n", principal, near)
	}
}

// nearPrincipal returns a principal the table names (in a group's
// members or with a scope of its own) close to principal, which it does
// not name: likely the one meant. It returns "" when the table names
// principal, or names none close to it.
func nearPrincipal(src *table.Table, principal string) string {
	if principal == "" {
		return ""
	}
	known := map[string]bool{}
	for _, sc := range src.Scopes {
		if name, ok := strings.CutPrefix(sc.Name, "principal:"); ok {
			known[name] = true
		}
		for _, m := range sc.Members {
			known[m] = true
		}
	}
	if known[principal] {
		return ""
	}
	return compiler.Suggest(principal, slices.Sorted(maps.Keys(known)))
}
