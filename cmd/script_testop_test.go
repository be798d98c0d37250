package cmd

import (
	"context"
	"os"
	"strings"
	"sync"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/policyc/policyc/internal/testop"
)

// providers are the OpenID providers the scripts started, by script.
var providers sync.Map // *testscript.TestScript → *testop.Provider

// cmdTestop runs a real OpenID provider (internal/testop) in the test
// process for a script, on loopback:
//
//	testop start              start it; $ISSUER is its issuer URL
//	testop subst FILE...      replace ISSUER_URL in each FILE by $ISSUER
//	testop client ID SUBJECT AUDIENCE [GROUP...]
//	                          add a client-credentials client (secret
//	                          ID-secret) whose tokens carry SUBJECT,
//	                          AUDIENCE ("-": the resource the token request
//	                          names) and the groups claim
//	testop token ID [SCOPE...]
//	                          print a token of client ID, got from the
//	                          provider's token endpoint
//
// The provider stops when the script ends.
func cmdTestop(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: testop start|subst|client|token ...")
	}
	op := func() *testop.Provider {
		p, ok := providers.Load(ts)
		if !ok {
			ts.Fatalf("testop: no provider; run testop start first")
		}
		return p.(*testop.Provider)
	}
	switch args[0] {
	case "start":
		p, err := testop.Start(jose.RS256)
		ts.Check(err)
		providers.Store(ts, p)
		ts.Defer(func() {
			p.Close()
			providers.Delete(ts)
		})
		ts.Setenv("ISSUER", p.Issuer)
	case "subst":
		for _, f := range args[1:] {
			path := ts.MkAbs(f)
			b, err := os.ReadFile(path)
			ts.Check(err)
			ts.Check(os.WriteFile(path, []byte(strings.ReplaceAll(string(b), "ISSUER_URL", op().Issuer)), 0o600))
		}
	case "client":
		if len(args) < 4 {
			ts.Fatalf("usage: testop client ID SUBJECT AUDIENCE [GROUP...]")
		}
		groups := make([]any, 0, len(args)-4)
		for _, g := range args[4:] {
			groups = append(groups, g)
		}
		var aud []string
		if args[3] != "-" {
			aud = []string{args[3]}
		}
		op().SetClient(args[1], testop.Client{Secret: args[1] + "-secret", Subject: args[2], Audience: aud,
			Claims: map[string]any{"groups": groups}})
	case "token":
		if len(args) < 2 {
			ts.Fatalf("usage: testop token ID [SCOPE...]")
		}
		tok, err := op().Token(context.Background(), args[1], args[2:]...)
		ts.Check(err)
		ts.Stdout().Write([]byte(tok + "\n"))
	default:
		ts.Fatalf("testop: unknown subcommand %q", args[0])
	}
}
