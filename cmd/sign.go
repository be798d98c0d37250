package cmd

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/envelope"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newSignCmd) }

func newSignCmd() *cobra.Command {
	var out string
	var o *signOptions
	c := &cobra.Command{
		Use:   "sign (TABLE | SIGNED) (--key FILE | --key-env VAR) [-o FILE] [--expires WHEN]",
		Short: "Sign a decision table, or add a signature to a signed one",
		Long: `Sign a compiled decision table with an Ed25519 private key. The output is a
DSSE envelope (payloadType ` + table.PayloadType + `) whose payload is
the table's canonical bytes; a gateway loads only such an envelope, and only
when a key it trusts signed it (see 'policyc verify' and docs/signing.md).

The private key comes from a file (--key, as 'policyc keygen' writes it) or
from an environment variable holding the PEM text (--key-env VAR, for a CI
secret); never from the command line itself. A key file that anyone but its
owner can read or write is refused (chmod 600 it).

Given an envelope that is already signed, sign adds its signature and keeps
the others: during a key rotation both the old and the new key sign, so
gateways trusting either accept the table. Adding a signature never changes
the payload.

--expires sets the table's expiry: a duration from now (720h, 30d) or an RFC
3339 time. Gateways refuse the table from that instant on. The expiry is part
of the signed table, so it can only be set when signing a bare table; an
envelope's expiry cannot change without every key signing again.

Nothing is written unless everything succeeds; output files are written
atomically.

Examples:
  policyc sign table.json --key ci.key -o table.signed.json
  policyc sign table.json --key-env POLICYC_SIGNING_KEY --expires 30d -o table.signed.json
  policyc sign table.signed.json --key new.key -o table.signed.json
  policyc compile policy -o - | policyc sign - --key ci.key > table.signed.json`,
		Args: argsRange(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if o.keyFile == "" && o.keyEnv == "" {
				return usageErrorf("a signing key is required: --key FILE or --key-env VAR (see 'policyc sign --help')")
			}
			key, err := o.key()
			if err != nil {
				return err
			}
			in, err := readInput(c.InOrStdin(), args[0])
			if errors.Is(err, envelope.ErrTooLarge) {
				return failuref("%v", err)
			}
			if err != nil {
				return err
			}
			if len(bytes.TrimSpace(in)) == 0 {
				return failuref("%s is empty: nothing to sign", args[0])
			}
			var signed []byte
			var done string // said once the envelope is written
			env, err := envelope.Parse(in)
			switch {
			case err == nil:
				signed, done, err = o.addSignature(env, key, args[0])
			case errors.Is(err, envelope.ErrNotEnvelope):
				signed, done, err = o.sealWith(in, key, args[0], c.ErrOrStderr())
			case json.Valid(in):
				// An envelope, but a broken one.
				err = withCode(ExitBadSignature, fmt.Errorf("%s: %w", args[0], err))
			default:
				err = failuref("%s is neither a decision table nor a signed envelope: it is not JSON (%v)", args[0], err)
			}
			if err != nil {
				return err
			}
			if err := writeOutput(c.OutOrStdout(), out, signed, 0o644); err != nil {
				return err
			}
			fmt.Fprintln(c.ErrOrStderr(), done)
			return nil
		},
	}
	o = newSignOptions(c.Flags())
	addOutputFlag(c.Flags(), &out, "-", "the signed envelope to `FILE` (- for standard output)")
	return c
}

// signOptions are the flags that choose a signing key and an expiry:
// --key FILE, --key-env VAR and --expires WHEN, the same on sign and on
// compile, which signs the table it builds when a key is given.
type signOptions struct {
	keyFile, keyEnv, expires string
	// now is the clock --expires durations count from.
	now func() time.Time
}

func newSignOptions(fs *pflag.FlagSet) *signOptions {
	o := &signOptions{now: time.Now}
	fs.StringVar(&o.keyFile, "key", "", "sign with the Ed25519 private key in `FILE` (PKCS #8 PEM, mode 0600)")
	fs.StringVar(&o.keyEnv, "key-env", "", "sign with the PEM private key held in environment variable `VAR` (a CI secret)")
	fs.StringVar(&o.expires, "expires", "", "the table expires after `WHEN`: a duration (720h, 30d) or an RFC 3339 time")
	return o
}

// addOldSignFlags keeps compile's old spellings of --key and --key-env,
// --sign FILE and --sign-env VAR, for one release.
func (o *signOptions) addOldSignFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.keyFile, "sign", "", "sign with the private key in FILE")
	fs.StringVar(&o.keyEnv, "sign-env", "", "sign with the private key in environment variable VAR")
	deprecate(fs, "sign", "--key")
	deprecate(fs, "sign-env", "--key-env")
}

// seal signs canonical table bytes when a signing key was given and
// returns the DSSE envelope to write instead of the table; enabled is false
// (and the table is to be written as it is) when no key was given. Errors
// carry their exit codes; on error nothing must be written.
func (o *signOptions) seal(tableBytes []byte, stderr io.Writer) (envelopeBytes []byte, enabled bool, done string, err error) {
	if o.keyFile == "" && o.keyEnv == "" {
		if o.expires != "" {
			return nil, false, "", usageErrorf("--expires needs --key or --key-env: only a signed table carries an expiry")
		}
		return nil, false, "", nil
	}
	key, err := o.key()
	if err != nil {
		return nil, true, "", err
	}
	b, done, err := o.sealWith(tableBytes, key, "the table", stderr)
	return b, true, done, err
}

// sealWith wraps a bare table in a new envelope signed by key, setting the
// expiry first when asked. It returns what to say once the envelope is
// written: saying it before would claim a table signed that a failed write
// then leaves unwritten. Warnings go to stderr at once.
func (o *signOptions) sealWith(in []byte, key ed25519.PrivateKey, name string, stderr io.Writer) ([]byte, string, error) {
	src, err := table.Decode(in)
	if err != nil {
		var fe *table.FormatError
		if errors.As(err, &fe) && fe.Found != "" {
			return nil, "", withCode(ExitUnknownFormat, fmt.Errorf("%s: %w", name, err))
		}
		return nil, "", failuref("%s is not a valid decision table: %v", name, err)
	}
	if src.Source.Dirty {
		fmt.Fprintf(stderr, "warning: %s was compiled from a work tree with uncommitted policy changes; a table for gateways should come from 'policyc compile --rev'\n", name)
	}
	payload := in
	if o.expires != "" {
		exp, err := parseExpiry(o.expires, o.now())
		if err != nil {
			return nil, "", err
		}
		src.Expires = exp.Format(time.RFC3339)
		if payload, err = table.Encode(src); err != nil {
			return nil, "", failuref("encode table: %v", err)
		}
	}
	env := &envelope.Envelope{PayloadType: table.PayloadType, Payload: payload}
	env.Sign(key)
	if err := env.CheckLimits(); err != nil {
		return nil, "", failuref("%s: %v", name, err)
	}
	expiry := "no expiry"
	if src.Expires != "" {
		expiry = "expires " + src.Expires
	}
	return env.Marshal(), fmt.Sprintf("signed table %s (serial %d, %s) with key %s", src.Digest, src.Serial, expiry, env.Signatures[0].KeyID), nil
}

// addSignature adds key's signature to a signed envelope, leaving the
// payload and the other signatures as they are. Like sealWith, it returns
// what to say once the envelope is written.
func (o *signOptions) addSignature(env *envelope.Envelope, key ed25519.PrivateKey, name string) ([]byte, string, error) {
	if env.PayloadType != table.PayloadType {
		return nil, "", withCode(ExitWrongType, fmt.Errorf("%s is an envelope of payloadType %q, not a policyc decision table (%q); refusing to sign it", name, env.PayloadType, table.PayloadType))
	}
	if o.expires != "" {
		return nil, "", usageErrorf("%s is already signed: its expiry is part of the signed payload, so changing it would void the signatures it carries. Sign the bare table again with --expires, with every key that must sign it", name)
	}
	pub := key.Public().(ed25519.PublicKey)
	id := envelope.KeyID(pub)
	msg := envelope.PAE(env.PayloadType, env.Payload)
	for _, s := range env.Signatures {
		if ed25519.Verify(pub, msg, s.Sig) {
			return env.Marshal(), fmt.Sprintf("%s is already signed by key %s; envelope unchanged", name, id), nil
		}
		if s.KeyID == id {
			return nil, "", withCode(ExitBadSignature, fmt.Errorf("%s has a signature claiming key %s that does not verify: the payload or the signature was altered; refusing to countersign it", name, id))
		}
	}
	src, err := table.Decode(env.Payload)
	if err != nil {
		var fe *table.FormatError
		if errors.As(err, &fe) && fe.Found != "" {
			return nil, "", withCode(ExitUnknownFormat, fmt.Errorf("%s: %w", name, err))
		}
		return nil, "", failuref("%s: the signed payload is not a valid decision table: %v", name, err)
	}
	env.Sign(key)
	if err := env.CheckLimits(); err != nil {
		return nil, "", failuref("%s: %v", name, err)
	}
	done := fmt.Sprintf("added a signature by key %s to table %s (serial %d); %d signatures", id, src.Digest, src.Serial, len(env.Signatures))
	return env.Marshal(), done, nil
}

// key reads the private key from the file or the environment variable.
func (o *signOptions) key() (ed25519.PrivateKey, error) {
	switch {
	case o.keyFile != "" && o.keyEnv != "":
		return nil, usageErrorf("--key and --key-env are exclusive: give the key one way")
	case strings.Contains(o.keyFile, "-----BEGIN") || strings.Contains(o.keyEnv, "-----BEGIN"):
		return nil, usageErrorf("a private key was given on the command line, where process listings and shell history keep it: put it in a file (--key FILE) or in an environment variable named by --key-env VAR")
	case o.keyFile != "":
		if _, err := os.Stat(o.keyFile); errors.Is(err, fs.ErrNotExist) && os.Getenv(o.keyFile) != "" {
			return nil, usageErrorf("signing key: no file %s, but an environment variable of that name is set: to sign with the key it holds, write --key-env %s", o.keyFile, o.keyFile)
		}
		return readPrivateKeyFile(o.keyFile)
	}
	v, ok := os.LookupEnv(o.keyEnv)
	if !ok || strings.TrimSpace(v) == "" {
		hint := ""
		others := slices.DeleteFunc(environmentNames(), func(n string) bool { return n == o.keyEnv })
		if near := compiler.Suggest(o.keyEnv, others); near != "" {
			hint = fmt.Sprintf("; did you mean %s?", near)
		}
		return nil, usageErrorf("environment variable %s is unset or empty: it must hold the PEM private key (a CI secret)%s", o.keyEnv, hint)
	}
	if !strings.Contains(v, "\n") && strings.Contains(v, `\n`) {
		// Some secret stores flatten a PEM to one line with literal \n.
		v = strings.ReplaceAll(v, `\n`, "\n")
	}
	key, err := envelope.ParsePrivateKey([]byte(v))
	if err != nil {
		return nil, usageErrorf("environment variable %s: %v", o.keyEnv, err)
	}
	return key, nil
}

// readPrivateKeyFile reads a private key file, refusing one that anyone
// but its owner may read or write: a signing key others can read is a
// signing key others have.
func readPrivateKeyFile(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usageErrorf("signing key: %v", err)
		}
		return nil, failuref("signing key: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, failuref("signing key: %v", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, failuref("signing key: %v", err)
	}
	key, err := envelope.ParsePrivateKey(b)
	if err != nil {
		return nil, usageErrorf("%s: %v", path, err)
	}
	// Checked on a real private key only, so that a public key given by
	// mistake is reported as that.
	if perm := st.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, usageErrorf("%s is accessible to others (mode %04o): a private key must be readable by its owner only; run 'chmod 600 %s' (and consider the key exposed if others could read it)", path, perm, path)
	}
	return key, nil
}

// parseExpiry reads --expires: a positive duration from now (Go syntax, or
// whole days as "30d") or an RFC 3339 time, which must be in the future.
// The result is in UTC, whole seconds.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		t = t.UTC().Truncate(time.Second)
		if !t.After(now) {
			return time.Time{}, usageErrorf("--expires %s is not in the future: the table would be refused at once", s)
		}
		return t, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if n, err = strconv.Atoi(days); err == nil {
			d = time.Duration(n) * 24 * time.Hour
			if n > 0 && d/(24*time.Hour) != time.Duration(n) {
				d = -1 // overflow
			}
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil {
		return time.Time{}, usageErrorf("--expires %q is neither a duration (720h, 30d) nor an RFC 3339 time (2026-12-31T00:00:00Z)", s)
	}
	if d <= 0 {
		return time.Time{}, usageErrorf("--expires %s is not a positive duration", s)
	}
	return now.Add(d).UTC().Truncate(time.Second), nil
}

// readInput reads a file, or standard input for "-", taking no more of
// either than an envelope may hold (envelope.MaxSize): the error for more
// wraps envelope.ErrTooLarge and is left to the caller to word.
func readInput(stdin io.Reader, path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = envelope.Read(stdin)
	} else {
		b, err = envelope.ReadFile(path)
	}
	if errors.Is(err, envelope.ErrTooLarge) {
		return nil, err
	}
	if err != nil {
		return nil, failuref("%v", err)
	}
	return b, nil
}

// environmentNames lists the names of the variables set in the
// environment, for a "did you mean" when --key-env names none of them.
func environmentNames() []string {
	var names []string
	for _, kv := range os.Environ() {
		if name, _, ok := strings.Cut(kv, "="); ok && name != "" {
			names = append(names, name)
		}
	}
	return names
}
