package cmd

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/internal/fileio"
	"github.com/policyc/policyc/runtime/envelope"
)

func init() { register(newKeygenCmd) }

func newKeygenCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "keygen -o NAME",
		Short: "Create an Ed25519 key pair for signing decision tables",
		Long: `Create an Ed25519 signing key pair:

  NAME.key  the private key (PKCS #8 PEM, mode 0600). It signs tables; keep it
            secret, for example as a CI secret, and never give it to a gateway.
  NAME.pub  the public key (PKIX PEM). Gateways trust tables signed by it
            (policyc verify --trust NAME.pub).

The key id, printed on standard output, is "sha256:" and the hex SHA-256 of the
public key's DER encoding; signatures carry it as a hint. keygen never
overwrites a file: if NAME.key or NAME.pub exists it refuses and writes nothing.

Examples:
  policyc keygen -o ci
  KEYID=$(policyc keygen -o keys/policy-2026)`,
		Args: argsRange(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			if out == "" {
				return usageErrorf("-o/--output NAME is required: keygen writes NAME.key and NAME.pub (see 'policyc keygen --help')")
			}
			// "-" means standard output elsewhere; keygen writes two
			// files, and a private key is not printed.
			if out == "-" {
				return usageErrorf("-o - would name the key files -.key and -.pub: keygen writes two files and never prints a private key; give a NAME, e.g. -o ci")
			}
			// NAME is a path without the extension: a directory (keys/)
			// would give hidden files named only by it (keys/.key).
			if base := filepath.Base(out); os.IsPathSeparator(out[len(out)-1]) || base == "." || base == ".." {
				return usageErrorf("-o %s names a directory; NAME is the path of the key files without their extension, e.g. -o %s", out, filepath.Join(out, "ci"))
			}
			keyPath, pubPath := out+".key", out+".pub"
			// keygen makes no directories: say which one is missing,
			// rather than name the temporary file it could not create.
			if dir := filepath.Dir(out); dir != "." {
				if st, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
					return failuref("-o %s: the directory %s does not exist; create it first (keygen writes the key files into an existing directory)", out, dir)
				} else if err == nil && !st.IsDir() {
					return failuref("-o %s: %s is not a directory", out, dir)
				}
			}
			exists := func(p string) error {
				return usageErrorf("%s already exists: keygen never overwrites a key; choose another -o name, or remove the old key yourself if you mean to replace it", p)
			}
			for _, p := range []string{keyPath, pubPath} {
				if _, err := os.Lstat(p); err == nil {
					return exists(p)
				} else if !errors.Is(err, fs.ErrNotExist) {
					return failuref("%v", err)
				}
			}
			pub, key, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return failuref("generate key: %v", err)
			}
			keyPEM, err := envelope.MarshalPrivateKey(key)
			if err != nil {
				return failuref("encode private key: %v", err)
			}
			pubPEM, err := envelope.MarshalPublicKey(pub)
			if err != nil {
				return failuref("encode public key: %v", err)
			}
			// Created, never replaced: a key made meanwhile by another
			// run is not overwritten either.
			if err := fileio.CreateAtomic(keyPath, keyPEM, 0o600); errors.Is(err, fs.ErrExist) {
				return exists(keyPath)
			} else if err != nil {
				return failuref("%v", err)
			}
			if err := fileio.CreateAtomic(pubPath, pubPEM, 0o644); err != nil {
				// Leave no half pair behind.
				os.Remove(keyPath)
				if errors.Is(err, fs.ErrExist) {
					return exists(pubPath)
				}
				return failuref("%v", err)
			}
			fmt.Fprintf(c.ErrOrStderr(), "wrote %s (private: keep it secret, e.g. as a CI secret) and %s (public: give it to gateways)\n", keyPath, pubPath)
			fmt.Fprintln(c.OutOrStdout(), envelope.KeyID(pub))
			return nil
		},
	}
	addOutputFlag(c.Flags(), &out, "", "`NAME`.key and NAME.pub")
	c.Flags().StringVar(&out, "out", "", "write NAME.key and NAME.pub")
	deprecate(c.Flags(), "out", "-o/--output")
	return c
}
