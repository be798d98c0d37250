package cmd

import (
	"errors"
	"fmt"
)

// Exit codes. "The policy has problems", "the tool failed" and "you used it
// wrong" never share a code; README.md lists them all.
const (
	// ExitOK: success; for lint, no finding at the fail level.
	ExitOK = 0
	// ExitProblems: the policy has problems (compile errors, lint findings
	// at the fail level).
	ExitProblems = 1
	// ExitUsage: bad flags or arguments.
	ExitUsage = 2
	// ExitFailure: the tool failed (I/O, a broken table file, an internal
	// error); says nothing about the policy.
	ExitFailure = 3
	// ExitChanged: policyc diff found decisions that change, or
	// policyc catalog pull --check found upstreams that drifted from their
	// snapshots.
	ExitChanged = 4
	// ExitRefused: policyc approvals was refused by the admin API: an unknown
	// request (404), one already decided or expired (409), a principal's own
	// request (403), a decision the server does not allow (400), or a token
	// the admin side does not accept (401).
	ExitRefused = 5
)

// exitError carries an exit code with the error to print.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so Main exits with code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

func usageErrorf(format string, args ...any) error {
	return withCode(ExitUsage, fmt.Errorf(format, args...))
}

func failuref(format string, args ...any) error {
	return withCode(ExitFailure, fmt.Errorf(format, args...))
}

// errSilent is an error whose message has already been printed (as
// diagnostics); Main only exits with its code.
var errSilent = errors.New("")

// exitCode maps an error to the process exit code.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitFailure
}

// Exit codes of signature verification: each refusal has its own, so a
// deployment script can tell them apart.
const (
	// ExitUnsigned: a bare table where a signed envelope was expected.
	ExitUnsigned = 10
	// ExitBadSignature: the payload or a signature was altered, or the
	// envelope is malformed.
	ExitBadSignature = 11
	// ExitUntrusted: signed, but by no trusted key.
	ExitUntrusted = 12
	// ExitWrongType: the envelope's payloadType is not a policyc table.
	ExitWrongType = 13
	// ExitUnknownFormat: a table format this build does not read.
	ExitUnknownFormat = 14
	// ExitExpired: the table's expiry has passed.
	ExitExpired = 15
	// ExitRollback: the table's serial is older than the last accepted one.
	ExitRollback = 16
)
