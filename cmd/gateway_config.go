package cmd

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/gateway/config"
)

// readGatewayConfig reads and checks the configuration of --config, with
// the flags that replace its keys, and returns it with the directory its
// positions are relative to. Its problems are printed, all of them.
func readGatewayConfig(o gatewayOptions, use config.Use, stderr io.Writer) (*config.Config, string, error) {
	files, dir, err := config.ReadFiles(o.config)
	if err != nil {
		return nil, "", failuref("--config: %v", err)
	}
	opts := config.Options{Use: use, Probe: o.check, Table: o.table, StateDir: o.state, DecisionLog: o.decisionLog}
	if len(o.trust) > 0 {
		opts.Trust = func() ([]ed25519.PublicKey, error) {
			keys, _, err := readTrustedKeys(o.trust)
			return keys, err
		}
	}
	s, diags, err := config.Check(files, dir, opts)
	var oe *config.OverrideError
	var ee *exitError
	switch {
	case errors.As(err, &oe):
		flag := map[string]string{"decision_log": "--decision-log", "state_dir": "--state"}[oe.Key]
		if flag == "" {
			flag = oe.Key
		}
		return nil, "", usageErrorf("%s: %v", flag, oe.Err)
	case errors.As(err, &ee):
		return nil, "", err // a --trust file, from readTrustedKeys
	case err != nil:
		return nil, "", failuref("%v", err)
	case len(diags) > 0:
		return nil, "", gatewayDiagnostics(stderr, dir, diags, use)
	}
	return s, dir, nil
}

// gatewayDiagnostics prints configuration problems and a summary.
func gatewayDiagnostics(w io.Writer, root string, ds []compiler.Diagnostic, use config.Use) error {
	n := 0
	for _, d := range ds {
		fmt.Fprintln(w, d.Format(filepath.ToSlash(root)))
		if d.Severity == compiler.Error {
			n++
		}
	}
	notDone := "the gateway cannot start"
	if use == config.ForPull {
		notDone = "nothing was pulled"
	}
	fmt.Fprintf(w, "%s in the gateway configuration: %s\n", count(n, "error"), notDone)
	return withCode(ExitProblems, errSilent)
}

// unwrapPath drops the operation and path of a *fs.PathError, for a
// message that names the path itself.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
