package cmd

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/envelope"
	"github.com/policyc/policyc/runtime/table"
)

// tableLoader reads the signed table and verifies it, every time: at boot
// and on every reload. It is the gateway's only way to a table.
// from says where the path was given, for the error of a table that does
// not exist: "the configuration's table (gateway.cue:3:1)" or "--table".
func tableLoader(path, from string, trusted []ed25519.PublicKey, stateDir string, check bool) func(func(*decide.Table) error) (*decide.Table, error) {
	return func(accept func(*decide.Table) error) (*decide.Table, error) {
		b, err := envelope.ReadFile(path)
		if errors.Is(err, envelope.ErrTooLarge) {
			return nil, fmt.Errorf("%s refused: %w: %w", path, decide.ErrBadSignature, err)
		}
		if errors.Is(err, fs.ErrNotExist) {
			// Before the first table is deployed, the likeliest start.
			or := ", or give --table FILE"
			if from == "--table" {
				or = ""
			}
			return nil, &missingTableError{fmt.Sprintf("read the signed table: %s, named by %s, does not exist; compile and sign the policy there (policyc compile POLICY -o table.json; policyc sign table.json --key KEY -o %s)%s",
				path, from, path, or)}
		}
		if err != nil {
			return nil, fmt.Errorf("read the signed table: %w", err)
		}
		// The state records a table only once the gateway accepts it, and
		// never for --check, which must not change what a start accepts.
		t, _, err := decide.LoadVerified(b, decide.VerifyOptions{Trusted: trusted, StateDir: stateDir, Accept: accept, ReadOnly: check})
		if err != nil {
			return nil, fmt.Errorf("%s refused: %w", path, err)
		}
		return t, nil
	}
}

// missingTableError is a signed table that does not exist, worded with
// what to do; it is an fs.ErrNotExist.
type missingTableError struct{ msg string }

func (e *missingTableError) Error() string { return e.msg }
func (e *missingTableError) Unwrap() error { return fs.ErrNotExist }

// checkChannels reports every approval or consent channel of a served
// server that cannot reach anyone through the gate as configured.
func checkChannels(t *decide.Table, gate *approval.Gate, upstreams []string) error {
	src := t.Source()
	approves := func(a *table.Access) bool {
		if a == nil {
			return false
		}
		for _, r := range a.Rules {
			if r.Effect == table.Approve.String() {
				return true
			}
		}
		return false
	}
	var errs []error
	checked := map[string]bool{}
	check := func(server, what, name string) {
		if name == "" {
			errs = append(errs, fmt.Errorf("server %s %s but names no channel", server, what))
			return
		}
		if checked[name] {
			return
		}
		checked[name] = true
		ch, ok := src.Channels[name]
		if !ok {
			errs = append(errs, fmt.Errorf("server %s %s through channel %q, which the table does not define", server, what, name))
			return
		}
		if err := gate.CheckChannel(name, approval.Channel{Name: name, Kind: ch.Kind, URL: ch.URL}); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range upstreams {
		s, ok := src.Servers[name]
		if !ok {
			continue
		}
		held := approves(s.Tool)
		for _, sc := range src.Scopes {
			for _, key := range []string{name, table.AllServers} {
				if ss, ok := sc.Servers[key]; ok {
					held = held || approves(ss.Tool)
				}
			}
		}
		if held {
			check(name, "holds tool calls for approval", s.Tool.ApprovalChannel)
		}
		if s.UI != nil && len(s.UI.AllowList) > 0 {
			check(name, "asks consent for ui:// resources", s.UI.ConsentChannel)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}
