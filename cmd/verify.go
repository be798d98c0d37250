package cmd

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/envelope"
)

func init() { register(newVerifyCmd) }

func newVerifyCmd() *cobra.Command {
	var trustFiles []string
	var at, stateDir, out, format string
	c := &cobra.Command{
		Use:   "verify SIGNED --trust KEY.pub [--trust KEY.pub ...]",
		Short: "Check a signed decision table exactly as a gateway does before loading it",
		Long: `Verify a signed decision table with the code a gateway runs at boot: the
envelope must be signed by one of the trusted public keys over exactly its
payload; only then is the table decoded, and it must be of a format this build
reads, not expired, and (with --state) not older than the last table accepted.

The keyid a signature carries is only a hint: trust comes from verifying
against the --trust keys. With several --trust keys (a key rotation), a
signature by any of them is enough.

Each refusal has its own exit code:
  10  a bare, unsigned table
  11  the payload or a signature was altered; a malformed, truncated or
      unsigned envelope
  12  signed only by keys that are not trusted
  13  the envelope's payloadType is not a policyc decision table
  14  a table format this build does not read
  15  the table has expired (--at sets the time to check against)
  16  the table's serial is older than the last accepted one (--state)
A bad --trust key is a usage error (2); a trusted signature over something
that is not a valid table, or an unreadable state file, is a failure (3).

With --state DIR, verify also keeps the serial of the last accepted table in
DIR, as a gateway does (docs/signing.md); without it there is no rollback
check. With -o, the verified table is written out (bare, for the tools that
read tables), only after every check passed. --format json prints what was
verified as one JSON object; a refusal is on standard error either way.

Examples:
  policyc verify table.signed.json --trust ci.pub
  policyc verify table.signed.json --trust old.pub --trust new.pub
  policyc verify table.signed.json --trust ci.pub --at 2026-07-01T00:00:00Z
  policyc verify table.signed.json --trust ci.pub --state /var/lib/policyc -o table.json
  policyc verify table.signed.json --trust ci.pub --format json | jq .serial`,
		Args: argsRange(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			if format == "json" && out == "-" {
				return usageErrorf("--format json and -o - would both write to standard output: give -o a file")
			}
			if len(trustFiles) == 0 {
				return usageErrorf("--trust KEY.pub is required: a table is only as good as the key that signed it (see 'policyc verify --help')")
			}
			now := time.Now
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErrorf("--at %q is not an RFC 3339 time (2026-12-31T00:00:00Z)", at)
				}
				now = func() time.Time { return t }
			}
			trusted, names, err := readTrustedKeys(trustFiles)
			if err != nil {
				return err
			}
			in, err := readInput(c.InOrStdin(), args[0])
			if errors.Is(err, envelope.ErrTooLarge) {
				// Refused as LoadVerified refuses an envelope over the
				// limit: malformed.
				return verifyError(args[0], fmt.Errorf("%w: %w", decide.ErrBadSignature, err))
			}
			if err != nil {
				return err
			}
			t, v, err := decide.LoadVerified(in, decide.VerifyOptions{Trusted: trusted, Now: now, StateDir: stateDir})
			if err != nil {
				return verifyError(args[0], err)
			}
			if out != "" {
				if err := writeOutput(c.OutOrStdout(), out, v.Payload, 0o644); err != nil {
					return err
				}
				if out == "-" {
					return nil
				}
			}
			if format == "json" {
				return writeVerifiedJSON(c.OutOrStdout(), args[0], t, v, names, stateDir)
			}
			writeVerified(c.OutOrStdout(), args[0], t, v, names, stateDir)
			return nil
		},
	}
	f := c.Flags()
	addTrustFlag(f, &trustFiles, "")
	f.StringVar(&at, "at", "", "check expiry at `TIME` (RFC 3339) instead of now")
	f.StringVar(&stateDir, "state", "", "keep the last accepted serial in `DIR` and refuse older tables, as a gateway does")
	addOutputFlag(f, &out, "", "the bare table, once verified, to `FILE` (- for standard output)")
	addFormatFlag(f, &format, "text", "json")
	return c
}

// readTrustedKeys reads public key files. It returns the keys and, by key
// id, the file each came from.
func readTrustedKeys(paths []string) ([]ed25519.PublicKey, map[string]string, error) {
	var keys []ed25519.PublicKey
	names := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, usageErrorf("--trust: %v", err)
		}
		k, err := envelope.ParsePublicKey(b)
		if err != nil {
			return nil, nil, usageErrorf("--trust %s: %v", p, err)
		}
		keys = append(keys, k)
		names[envelope.KeyID(k)] = p
	}
	return keys, names, nil
}

// verifyExitCode is the exit code of a decide.LoadVerified error.
func verifyExitCode(err error) int {
	switch {
	case errors.Is(err, decide.ErrUnsigned):
		return ExitUnsigned
	case errors.Is(err, decide.ErrBadSignature):
		return ExitBadSignature
	case errors.Is(err, decide.ErrUntrusted):
		return ExitUntrusted
	case errors.Is(err, decide.ErrWrongType):
		return ExitWrongType
	case errors.Is(err, decide.ErrUnknownFormat):
		return ExitUnknownFormat
	case errors.Is(err, decide.ErrExpired):
		return ExitExpired
	case errors.Is(err, decide.ErrRollback):
		return ExitRollback
	}
	return ExitFailure
}

// verifyError names the refused file and carries the refusal's exit code.
func verifyError(name string, err error) error {
	return withCode(verifyExitCode(err), fmt.Errorf("%s refused: %w", name, err))
}

func writeVerified(w io.Writer, name string, t *decide.Table, v *decide.Verified, names map[string]string, stateDir string) {
	src := t.Source()
	fmt.Fprintf(w, "verified %s\n", name)
	fmt.Fprintf(w, "  table:     %s\n", v.Digest)
	fmt.Fprintf(w, "  serial:    %d\n", v.Serial)
	where := src.Source.PolicyPath
	if src.Source.Commit != "" {
		where += " at commit " + src.Source.Commit
	}
	if src.Source.Repository != "" {
		where += " of " + src.Source.Repository
	}
	if src.Source.Dirty {
		where += " (dirty work tree)"
	}
	fmt.Fprintf(w, "  source:    %s\n", where)
	if v.Expires.IsZero() {
		fmt.Fprintf(w, "  expires:   never\n")
	} else {
		fmt.Fprintf(w, "  expires:   %s\n", v.Expires.UTC().Format(time.RFC3339))
	}
	var by []string
	for _, id := range v.KeyIDs {
		by = append(by, fmt.Sprintf("%s (%s)", id, names[id]))
	}
	fmt.Fprintf(w, "  signed by: %s\n", strings.Join(by, ", "))
	if stateDir != "" {
		if v.HadState {
			fmt.Fprintf(w, "  state:     accepted; last accepted serial was %d\n", v.LastSerial)
		} else {
			fmt.Fprintf(w, "  state:     accepted; first table recorded in %s\n", stateDir)
		}
	}
}

// verifiedJSON is what verify --format json prints.
type verifiedJSON struct {
	tableJSON
	Source   verifiedSource `json:"source"`
	Expires  *string        `json:"expires"`
	SignedBy []verifiedKey  `json:"signed_by"`
	// State is set with --state.
	State *verifiedState `json:"state,omitempty"`
}

type verifiedSource struct {
	PolicyPath string `json:"policy_path"`
	Commit     string `json:"commit,omitempty"`
	Repository string `json:"repository,omitempty"`
	Dirty      bool   `json:"dirty,omitempty"`
}

type verifiedKey struct {
	KeyID string `json:"keyid"`
	Trust string `json:"trust"`
}

type verifiedState struct {
	Dir string `json:"dir"`
	// LastSerial is the serial accepted before, absent for the first.
	LastSerial *uint64 `json:"last_serial"`
}

func writeVerifiedJSON(w io.Writer, name string, t *decide.Table, v *decide.Verified, names map[string]string, stateDir string) error {
	src := t.Source().Source
	out := verifiedJSON{tableJSON: tableJSON{File: name, Serial: v.Serial, Digest: v.Digest}, SignedBy: []verifiedKey{},
		Source: verifiedSource{PolicyPath: src.PolicyPath, Commit: src.Commit, Repository: src.Repository, Dirty: src.Dirty}}
	if !v.Expires.IsZero() {
		e := v.Expires.UTC().Format(time.RFC3339)
		out.Expires = &e
	}
	for _, id := range v.KeyIDs {
		out.SignedBy = append(out.SignedBy, verifiedKey{KeyID: id, Trust: names[id]})
	}
	if stateDir != "" {
		out.State = &verifiedState{Dir: stateDir}
		if v.HadState {
			last := v.LastSerial
			out.State.LastSerial = &last
		}
	}
	return writeJSON(w, out)
}
