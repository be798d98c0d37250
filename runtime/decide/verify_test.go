package decide_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/envelope"
	"github.com/policyc/policyc/runtime/table"
)

// verifyRefusals are the sentinels every LoadVerified refusal matches one of.
var verifyRefusals = []error{
	decide.ErrUnsigned, decide.ErrBadSignature, decide.ErrUntrusted, decide.ErrWrongType,
	decide.ErrUnknownFormat, decide.ErrInvalidTable, decide.ErrExpired, decide.ErrRollback,
}

// verifyRefusalOf returns the one sentinel err matches, or fails the test.
func verifyRefusalOf(t testing.TB, err error) error {
	t.Helper()
	var found []error
	for _, r := range verifyRefusals {
		if errors.Is(err, r) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("error %q matches %d refusal kinds %v, want exactly 1", err, len(found), found)
	}
	return found[0]
}

func verifyKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func verifyPub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// verifySmallTable is a table small enough to flip every byte of its envelope.
func verifySmallTable(serial uint64, expires string) *table.Table {
	none := func() *table.Access { return &table.Access{Default: table.Deny.String(), Rules: []table.Rule{}} }
	return &table.Table{
		Channels: map[string]table.Channel{},
		Compiler: "policyc test",
		Expires:  expires,
		Format:   table.Format,
		Scopes:   []table.Scope{},
		Serial:   serial,
		Servers: map[string]table.Server{
			"gh": {
				Tool: &table.Access{Default: table.Deny.String(), Rules: []table.Rule{
					{Effect: table.Deny.String(), Origin: "p.cue:2", Pattern: "delete_*"},
					{Effect: table.Allow.String(), Origin: "p.cue:3", Pattern: "get_*"},
				}},
				Prompt:   none(),
				Resource: none(),
			},
		},
		Source: table.Source{PolicyPath: "p"},
	}
}

func verifyEncode(t testing.TB, tab *table.Table) []byte {
	t.Helper()
	b, err := table.Encode(tab)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifySeal wraps payload in an envelope of payloadType signed by keys.
func verifySeal(payloadType string, payload []byte, keys ...ed25519.PrivateKey) []byte {
	e := &envelope.Envelope{PayloadType: payloadType, Payload: payload, Signatures: []envelope.Signature{}}
	for _, k := range keys {
		e.Sign(k)
	}
	return e.Marshal()
}

func verifyTrust(keys ...ed25519.PrivateKey) decide.VerifyOptions {
	opts := decide.VerifyOptions{}
	for _, k := range keys {
		opts.Trusted = append(opts.Trusted, verifyPub(k))
	}
	return opts
}

func TestLoadVerifiedAccepts(t *testing.T) {
	k := verifyKey(1)
	payload := verifyEncode(t, verifySmallTable(3, ""))
	tab, v, err := decide.LoadVerified(verifySeal(table.PayloadType, payload, k), verifyTrust(k))
	if err != nil {
		t.Fatal(err)
	}
	if got := verifyEncode(t, tab.Source()); !bytes.Equal(got, payload) {
		t.Fatalf("loaded table differs from the signed payload")
	}
	if v.Serial != 3 || v.Digest != tab.Digest() || len(v.KeyIDs) != 1 || v.KeyIDs[0] != envelope.KeyID(verifyPub(k)) || !v.Expires.IsZero() {
		t.Fatalf("Verified = %+v", v)
	}
	if d := tab.Decide("", "gh", table.Tool, "get_issue"); d.Effect != table.Allow {
		t.Fatalf("decision on the verified table: %+v", d)
	}
}

func TestLoadVerifiedRefusals(t *testing.T) {
	k, other := verifyKey(1), verifyKey(2)
	payload := verifyEncode(t, verifySmallTable(3, ""))
	good := verifySeal(table.PayloadType, payload, k)

	// A valid table (its own digest is right) under the old signature.
	widened := verifySmallTable(3, "")
	widened.Servers["gh"].Tool.Rules[1].Pattern = "*"
	tamperedEnv, _ := envelope.Parse(good)
	tamperedEnv.Payload = verifyEncode(t, widened)

	v2 := verifySmallTable(3, "")
	v2.Format = "policyc.table/v2"
	badPattern := verifySmallTable(3, "")
	badPattern.Servers["gh"].Tool.Rules[1].Pattern = "get_["

	cases := []struct {
		name string
		in   []byte
		want error
		msg  string
	}{
		{"bare table", payload, decide.ErrUnsigned, "bare decision table"},
		{"truncated envelope", good[:len(good)/2], decide.ErrBadSignature, "truncated"},
		{"empty file", nil, decide.ErrBadSignature, "malformed envelope"},
		{"not JSON", []byte("hello"), decide.ErrBadSignature, "malformed envelope"},
		{"no signatures", verifySeal(table.PayloadType, payload), decide.ErrBadSignature, "no signatures"},
		{"tampered payload", tamperedEnv.Marshal(), decide.ErrBadSignature, "does not verify"},
		{"untrusted signer", verifySeal(table.PayloadType, payload, other), decide.ErrUntrusted, "untrusted key"},
		{"other payloadType", verifySeal("application/vnd.in-toto+json", payload, k), decide.ErrWrongType, "not a policyc decision table"},
		{"newer policyc payloadType", verifySeal("application/vnd.policyc.table.v2+json", payload, k), decide.ErrUnknownFormat, "does not read"},
		{"unknown table format", verifySeal(table.PayloadType, verifyEncode(t, v2), k), decide.ErrUnknownFormat, "policyc.table/v2"},
		{"signed non-table", verifySeal(table.PayloadType, []byte(`{"format":"policyc.table/v1"}`), k), decide.ErrInvalidTable, "not a valid table"},
		{"signed JSON without a format", verifySeal(table.PayloadType, []byte(`{"servers":{}}`), k), decide.ErrInvalidTable, "not a policyc decision table"},
		{"signed bad pattern", verifySeal(table.PayloadType, verifyEncode(t, badPattern), k), decide.ErrInvalidTable, "get_["},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tab, v, err := decide.LoadVerified(c.in, verifyTrust(k))
			if err == nil || tab != nil || v != nil {
				t.Fatalf("accepted: %v %v %v", tab, v, err)
			}
			if got := verifyRefusalOf(t, err); got != c.want {
				t.Fatalf("refused as %v (%v), want %v", got, err, c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("message %q does not say %q", err, c.msg)
			}
		})
	}
	var fe *table.FormatError
	_, _, err := decide.LoadVerified(verifySeal(table.PayloadType, verifyEncode(t, v2), k), verifyTrust(k))
	if !errors.As(err, &fe) || fe.Found != "policyc.table/v2" {
		t.Fatalf("unknown format: %v does not carry the *table.FormatError", err)
	}
	if _, _, err := decide.LoadVerified(good, decide.VerifyOptions{}); err == nil {
		t.Fatal("loaded with no trusted keys")
	}
}

// Every byte of a small signed envelope, flipped or deleted: a change to
// the payload or the signature is refused; any other change is refused or
// yields exactly the signed table, never another one.
func TestLoadVerifiedEveryByte(t *testing.T) {
	k := verifyKey(1)
	payload := verifyEncode(t, verifySmallTable(3, ""))
	env := &envelope.Envelope{PayloadType: table.PayloadType, Payload: payload}
	env.Sign(k)
	good := env.Marshal()
	opts := verifyTrust(k)

	span := func(s string) [2]int {
		i := bytes.Index(good, []byte(s))
		if i < 0 || bytes.Count(good, []byte(s)) != 1 {
			t.Fatalf("%q is not in the envelope exactly once", s)
		}
		return [2]int{i, i + len(s)}
	}
	in := func(i int, r [2]int) bool { return i >= r[0] && i < r[1] }
	payloadSpan := span(`"` + verifyB64(payload) + `"`)
	sigSpan := span(`"` + verifyB64(env.Signatures[0].Sig) + `"`)
	keyIDSpan := span(`"` + env.Signatures[0].KeyID + `"`)
	keyIDSpan[0]++ // the value, not its quotes
	keyIDSpan[1]--

	check := func(what string, i int, m []byte) (accepted bool) {
		tab, v, err := decide.LoadVerified(m, opts)
		if err != nil {
			verifyRefusalOf(t, err)
			if tab != nil || v != nil {
				t.Fatalf("%s: refused but returned a table", what)
			}
			return false
		}
		if got := verifyEncode(t, tab.Source()); !bytes.Equal(got, payload) {
			t.Fatalf("%s: accepted a different table", what)
		}
		return true
	}
	var accepted, refused int
	for i := range good {
		for _, x := range []byte{0x01, 0x20, 0x80, 0xff} {
			m := bytes.Clone(good)
			m[i] ^= x
			what := fmt.Sprintf("byte %d (%q) ^ %#x", i, good[i], x)
			ok := check(what, i, m)
			switch {
			case (in(i, payloadSpan) || in(i, sigSpan)) && ok:
				t.Fatalf("%s: a change to the payload or signature was accepted", what)
			case in(i, keyIDSpan) && x != 0x20 && !ok:
				t.Fatalf("%s: a changed keyid hint was refused; trust must come from the signature", what)
			}
			if ok {
				accepted++
			} else {
				refused++
			}
		}
		m := append(bytes.Clone(good[:i]), good[i+1:]...)
		what := fmt.Sprintf("byte %d (%q) deleted", i, good[i])
		ok := check(what, i, m)
		// Dropping a padding '=' leaves the same bytes in unpadded base64,
		// which DSSE allows.
		if (in(i, payloadSpan) || in(i, sigSpan)) && good[i] != '=' && ok {
			t.Fatalf("%s: a change to the payload or signature was accepted", what)
		}
		if ok {
			accepted++
		} else {
			refused++
		}
	}
	t.Logf("%d-byte envelope: %d mutations accepted with the identical table, %d refused", len(good), accepted, refused)
}

// verifyB64 is how Marshal writes bytes: standard, padded base64.
func verifyB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Rotation: old key, new key, both, neither; trusted old, new, both, none.
func TestLoadVerifiedRotation(t *testing.T) {
	oldK, newK, stranger := verifyKey(10), verifyKey(11), verifyKey(12)
	payload := verifyEncode(t, verifySmallTable(3, ""))
	signedBy := map[string][]ed25519.PrivateKey{
		"old": {oldK}, "new": {newK}, "old+new": {oldK, newK}, "stranger": {stranger},
	}
	trusted := map[string][]ed25519.PrivateKey{
		"old": {oldK}, "new": {newK}, "old+new": {newK, oldK}, "neither": {stranger},
	}
	want := map[[2]string]string{
		{"old", "old"}: "old", {"old", "new"}: "", {"old", "old+new"}: "old", {"old", "neither"}: "",
		{"new", "old"}: "", {"new", "new"}: "new", {"new", "old+new"}: "new", {"new", "neither"}: "",
		{"old+new", "old"}: "old", {"old+new", "new"}: "new", {"old+new", "old+new"}: "old,new", {"old+new", "neither"}: "",
		{"stranger", "old"}: "", {"stranger", "new"}: "", {"stranger", "old+new"}: "", {"stranger", "neither"}: "stranger",
	}
	name := map[string]string{
		envelope.KeyID(verifyPub(oldK)): "old", envelope.KeyID(verifyPub(newK)): "new", envelope.KeyID(verifyPub(stranger)): "stranger",
	}
	for key, expect := range want {
		in := verifySeal(table.PayloadType, payload, signedBy[key[0]]...)
		_, v, err := decide.LoadVerified(in, verifyTrust(trusted[key[1]]...))
		if expect == "" {
			if !errors.Is(err, decide.ErrUntrusted) {
				t.Errorf("signed by %s, trusting %s: err = %v, want ErrUntrusted", key[0], key[1], err)
			}
			continue
		}
		if err != nil {
			t.Errorf("signed by %s, trusting %s: %v", key[0], key[1], err)
			continue
		}
		var got []string
		for _, id := range v.KeyIDs {
			got = append(got, name[id])
		}
		if strings.Join(got, ",") != expect {
			t.Errorf("signed by %s, trusting %s: verified by %v, want %s", key[0], key[1], got, expect)
		}
	}
}

func TestLoadVerifiedExpiry(t *testing.T) {
	k := verifyKey(1)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	in := verifySeal(table.PayloadType, verifyEncode(t, verifySmallTable(3, exp.Format(time.RFC3339))), k)
	at := func(now time.Time) decide.VerifyOptions {
		o := verifyTrust(k)
		o.Now = func() time.Time { return now }
		return o
	}
	_, v, err := decide.LoadVerified(in, at(exp.Add(-time.Second)))
	if err != nil || !v.Expires.Equal(exp) {
		t.Fatalf("a second before expiry: %v, %+v", err, v)
	}
	for _, now := range []time.Time{exp, exp.Add(time.Hour)} {
		_, _, err := decide.LoadVerified(in, at(now))
		var ee *decide.ExpiredError
		if verifyRefusalOf(t, err) != decide.ErrExpired || !errors.As(err, &ee) || !ee.Expires.Equal(exp) {
			t.Fatalf("at %s: err = %v, want ErrExpired", now, err)
		}
		if !strings.Contains(err.Error(), "2030-01-02T03:04:05Z") {
			t.Fatalf("message does not name the expiry: %v", err)
		}
	}
}

func TestLoadVerifiedRollback(t *testing.T) {
	k := verifyKey(1)
	dir := t.TempDir()
	opts := verifyTrust(k)
	opts.StateDir = dir
	state := filepath.Join(dir, decide.StateFile)
	signed := func(serial uint64, expires string) []byte {
		return verifySeal(table.PayloadType, verifyEncode(t, verifySmallTable(serial, expires)), k)
	}
	readState := func() string {
		b, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	load := func(in []byte) (*decide.Verified, error) {
		_, v, err := decide.LoadVerified(in, opts)
		return v, err
	}

	v, err := load(signed(5, ""))
	if err != nil || v.HadState {
		t.Fatalf("first load: %v %+v", err, v)
	}
	if st, err := os.Stat(state); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", st, err)
	}
	first := readState()
	if !strings.Contains(first, `"serial":5`) {
		t.Fatalf("state = %s", first)
	}
	// A restart loads the same table again.
	if v, err := load(signed(5, "")); err != nil || !v.HadState || v.LastSerial != 5 {
		t.Fatalf("reload of the same table: %v %+v", err, v)
	}
	// The same serial re-signed with a renewed expiry is accepted too.
	if _, err := load(signed(5, "2099-01-01T00:00:00Z")); err != nil {
		t.Fatalf("same serial, renewed expiry: %v", err)
	}
	renewed := readState()
	// But not going back to an earlier expiry or to none (an older
	// envelope replayed), nor other content at that serial; a restart
	// checks this as a reload does.
	changed := verifySmallTable(5, "2099-06-01T00:00:00Z")
	changed.Servers["gh"].Tool.Rules[1].Pattern = "*"
	for name, in := range map[string][]byte{
		"earlier expiry": signed(5, "2098-01-01T00:00:00Z"),
		"no expiry":      signed(5, ""),
		"other content":  verifySeal(table.PayloadType, verifyEncode(t, changed), k),
	} {
		if _, err := load(in); verifyRefusalOf(t, err) != decide.ErrRollback || !strings.Contains(err.Error(), "serial 5") {
			t.Errorf("%s at the accepted serial: err = %v", name, err)
		} else if name == "no expiry" && !strings.Contains(err.Error(), `re-signed with no expiry, which does not extend the accepted one's ("2099-01-01T00:00:00Z")`) {
			t.Errorf("no expiry at the accepted serial: the refusal does not say so: %v", err)
		}
		if readState() != renewed {
			t.Errorf("%s: the state changed: %s", name, readState())
		}
	}
	if _, err := load(signed(5, "2099-01-01T00:00:00Z")); err != nil {
		t.Fatalf("the accepted table again: %v", err)
	}
	// A state recorded before content was (serial and digest only) checks
	// the serial only.
	if err := os.WriteFile(state, []byte(`{"digest":"sha256:00","serial":5}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err = load(signed(5, ""))
	if err != nil {
		t.Fatalf("same serial against an old state file: %v", err)
	}
	// Loading the very table an old state names records its content, so
	// that other content at that serial is refused from then on.
	if err := os.WriteFile(state, []byte(`{"digest":"`+v.Digest+`","serial":5}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(signed(5, "")); err != nil {
		t.Fatalf("the table an old state file names: %v", err)
	}
	if !strings.Contains(readState(), `"content":"sha256:`) {
		t.Fatalf("an old state file was not brought up to date: %s", readState())
	}
	if _, err := load(verifySeal(table.PayloadType, verifyEncode(t, changed), k)); verifyRefusalOf(t, err) != decide.ErrRollback {
		t.Fatalf("other content at serial 5 after the old state was brought up to date: err = %v", err)
	}
	_, err = load(signed(4, ""))
	var re *decide.RollbackError
	if verifyRefusalOf(t, err) != decide.ErrRollback || !errors.As(err, &re) || re.Serial != 4 || re.Last != 5 || re.State != state {
		t.Fatalf("older serial: err = %v", err)
	}
	if _, err := load(signed(7, "")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readState(), `"serial":7`) {
		t.Fatalf("state not advanced: %s", readState())
	}
	before := readState()
	if _, err := load(signed(5, "")); !errors.Is(err, decide.ErrRollback) {
		t.Fatalf("after 7, serial 5: err = %v", err)
	}
	// Refused tables never advance the state, whatever their serial.
	expired := verifySmallTable(9, "2001-01-01T00:00:00Z")
	badPattern := verifySmallTable(9, "")
	badPattern.Servers["gh"].Tool.Rules[0].Pattern = "["
	for name, in := range map[string][]byte{
		"untrusted":   verifySeal(table.PayloadType, verifyEncode(t, verifySmallTable(9, "")), verifyKey(2)),
		"expired":     verifySeal(table.PayloadType, verifyEncode(t, expired), k),
		"bad pattern": verifySeal(table.PayloadType, verifyEncode(t, badPattern), k),
	} {
		if _, err := load(in); err == nil {
			t.Fatalf("%s: accepted", name)
		}
		if readState() != before {
			t.Fatalf("%s: a refused table changed the state: %s", name, readState())
		}
	}
	// A table the caller refuses (Accept) records nothing, and neither
	// does a read-only check of a table it would accept.
	callerSays := errors.New("the gateway cannot enforce it")
	opts.Accept = func(*decide.Table) error { return callerSays }
	if _, err := load(signed(9, "")); !errors.Is(err, callerSays) {
		t.Fatalf("refused by Accept: err = %v", err)
	}
	opts.Accept = nil
	opts.ReadOnly = true
	if _, err := load(signed(9, "")); err != nil {
		t.Fatalf("read-only: %v", err)
	}
	if _, err := load(signed(5, "")); !errors.Is(err, decide.ErrRollback) {
		t.Fatalf("read-only, serial 5 after 7: err = %v", err)
	}
	if readState() != before {
		t.Fatalf("Accept's refusal or a read-only load changed the state: %s", readState())
	}
	opts.ReadOnly = false

	// A corrupt state file stops loading (fail closed) and is left as is.
	if err := os.WriteFile(state, []byte("{\"serial\": \"7\"}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(signed(8, "")); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt state: err = %v", err)
	}
	if readState() != "{\"serial\": \"7\"}" {
		t.Fatal("corrupt state file was overwritten")
	}
	// A missing state directory is an error, not a silent fresh start.
	opts.StateDir = filepath.Join(dir, "missing")
	if _, err := load(signed(8, "")); err == nil || !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("missing state directory: err = %v", err)
	}
}

// FuzzLoadVerified: whatever the bytes, LoadVerified returns either a
// refusal of exactly one kind or the very table a trusted key signed.
func FuzzLoadVerified(f *testing.F) {
	k := verifyKey(1)
	payload, err := table.Encode(verifySmallTable(3, ""))
	if err != nil {
		f.Fatal(err)
	}
	good := verifySeal(table.PayloadType, payload, k)
	f.Add(good)
	f.Add(verifySeal(table.PayloadType, payload, verifyKey(2), k))
	f.Add(verifySeal(table.PayloadType, payload))
	f.Add(payload)
	f.Add(bytes.ReplaceAll(bytes.ReplaceAll(good, []byte("+"), []byte("-")), []byte("/"), []byte("_")))
	opts := verifyTrust(k)
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, _, err := decide.LoadVerified(b, opts)
		if err != nil {
			verifyRefusalOf(t, err)
			return
		}
		got, err := table.Encode(tab.Source())
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatal("accepted a table other than the one the trusted key signed")
		}
		env, err := envelope.Parse(b)
		if err != nil || !bytes.Equal(env.Payload, payload) {
			t.Fatal("accepted bytes whose envelope does not carry the signed payload")
		}
	})
}

// verifyBigTable is the 10,000-rule table of the benchmarks, the one
// BenchmarkDecide uses: 200 servers × 50 tool rules, about 60% globs,
// deny/approval/allow mixed, compiled from generated CUE.
func verifyBigTable(b *testing.B) *table.Table {
	gen := policygen.Generate(policygen.Spec{Servers: 200, RulesPerServer: 50, Seed: 1})
	res := compiler.Compile(compiler.Input{Files: gen.Files, Source: table.Source{PolicyPath: "gen"}, Serial: 1000})
	if res.Table == nil {
		b.Fatal("generated policy does not compile")
	}
	return res.Table
}

// BenchmarkLoadVerified: what a gateway does at boot with the 10,000-rule
// signed table: parse the envelope, verify the signature, decode the
// table, check expiry and the rollback state, and load it for decisions.
// The clock stops at the point a gateway can serve; the automata built in
// the background after that are waited for outside the timed region (they
// are measured by "automata"), so one iteration's background work does not
// slow the next.
func BenchmarkLoadVerified(b *testing.B) {
	k := verifyKey(1)
	payload := verifyEncode(b, verifyBigTable(b))
	signed := verifySeal(table.PayloadType, payload, k)
	opts := verifyTrust(k)
	opts.StateDir = b.TempDir()
	t0, _, err := decide.LoadVerified(signed, opts)
	if err != nil {
		b.Fatal(err)
	}
	// Its automata are built in the background, on both cores: wait, or
	// that build would be timed against the sub-benchmarks below.
	<-t0.Ready()
	b.Logf("table %d bytes, envelope %d bytes", len(payload), len(signed))
	b.Run("all", func(b *testing.B) {
		b.SetBytes(int64(len(signed)))
		for i := 0; i < b.N; i++ {
			t, _, err := decide.LoadVerified(signed, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			<-t.Ready()
			b.StartTimer()
		}
	})
	// The parts, to see where the time goes.
	b.Run("parse+verify", func(b *testing.B) {
		for b.Loop() {
			e, err := envelope.Parse(signed)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.Verify(opts.Trusted); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := table.Decode(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	src, err := table.Decode(payload)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("load", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			t, err := decide.Load(src)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			<-t.Ready()
			b.StartTimer()
		}
	})
	b.Run("automata", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			t, err := decide.Load(src)
			if err != nil {
				b.Fatal(err)
			}
			<-t.Ready()
		}
	})
}

// A table of serial 0, the build of uncommitted changes, refused as a
// rollback says how to go on, as a developer trying an edited policy meets
// it at the second build; other serials' refusals do not.
func TestLoadVerifiedWorkTreeHint(t *testing.T) {
	k := verifyKey(1)
	opts := verifyTrust(k)
	opts.StateDir = t.TempDir()
	state := filepath.Join(opts.StateDir, decide.StateFile)
	load := func(tb *table.Table) error {
		_, _, err := decide.LoadVerified(verifySeal(table.PayloadType, verifyEncode(t, tb), k), opts)
		return err
	}
	const hint = "serial 0 is a build of uncommitted changes"
	if err := load(verifySmallTable(0, "")); err != nil {
		t.Fatal(err)
	}
	edited := verifySmallTable(0, "")
	edited.Servers["gh"].Tool.Rules[1].Pattern = "*"
	err := load(edited)
	if verifyRefusalOf(t, err) != decide.ErrRollback || !strings.Contains(err.Error(), hint) || !strings.Contains(err.Error(), "remove "+state) {
		t.Fatalf("other content at serial 0: err = %v", err)
	}
	if err := load(verifySmallTable(3, "")); err != nil {
		t.Fatal(err)
	}
	if err := load(verifySmallTable(0, "")); verifyRefusalOf(t, err) != decide.ErrRollback || !strings.Contains(err.Error(), hint) {
		t.Fatalf("serial 0 after 3: err = %v", err)
	}
	if err := load(verifySmallTable(2, "")); verifyRefusalOf(t, err) != decide.ErrRollback || strings.Contains(err.Error(), hint) {
		t.Fatalf("serial 2 after 3: err = %v", err)
	}
}

// Two processes (a gateway reloading, policyc verify --state) recording
// tables at once: whichever order they run in, the newer serial is what
// the state keeps, never the older one written last.
func TestLoadVerifiedConcurrentState(t *testing.T) {
	k := verifyKey(1)
	six := verifySeal(table.PayloadType, verifyEncode(t, verifySmallTable(6, "")), k)
	seven := verifySeal(table.PayloadType, verifyEncode(t, verifySmallTable(7, "")), k)
	for i := range 50 {
		dir := t.TempDir()
		opts := verifyTrust(k)
		opts.StateDir = dir
		if _, _, err := decide.LoadVerified(verifySeal(table.PayloadType, verifyEncode(t, verifySmallTable(5, "")), k), opts); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, in := range [][]byte{six, seven} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				decide.LoadVerified(in, opts) // six may be refused once seven is in
			}()
		}
		wg.Wait()
		b, err := os.ReadFile(filepath.Join(dir, decide.StateFile))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"serial":7`) {
			t.Fatalf("round %d: the state kept %s after serials 6 and 7 were loaded at once", i, b)
		}
	}
}

func TestTableExpired(t *testing.T) {
	rt, err := decide.Load(verifySmallTable(1, "2027-01-01T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	at, ok := rt.Expires()
	if want := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); !ok || !at.Equal(want) {
		t.Fatalf("Expires() = %v, %v; want %v", at, ok, want)
	}
	for _, c := range []struct {
		now  time.Time
		want bool
	}{
		{at.Add(-time.Nanosecond), false},
		{at, true}, // from that instant on, as LoadVerified refuses it
		{at.Add(time.Hour), true},
	} {
		if got := rt.Expired(c.now); got != c.want {
			t.Errorf("Expired(%v) = %v, want %v", c.now, got, c.want)
		}
	}
	never, err := decide.Load(verifySmallTable(1, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := never.Expires(); ok || never.Expired(time.Now().Add(1000*time.Hour)) {
		t.Error("a table without an expiry expires")
	}
	if _, err := decide.Load(verifySmallTable(1, "tomorrow")); err == nil {
		t.Error("a table whose expiry is not RFC 3339 loads")
	}
}

// TestLoadVerifiedLimits: an envelope past the signature limit is refused
// as malformed before any signature is checked, even when one of its
// signatures is by a trusted key.
func TestLoadVerifiedLimits(t *testing.T) {
	payload := verifyEncode(t, verifySmallTable(3, ""))
	trustedK := verifyKey(20)
	keys := []ed25519.PrivateKey{trustedK}
	for i := range envelope.MaxSignatures {
		keys = append(keys, verifyKey(byte(30+i)))
	}
	if _, _, err := decide.LoadVerified(verifySeal(table.PayloadType, payload, keys[:envelope.MaxSignatures]...), verifyTrust(trustedK)); err != nil {
		t.Fatalf("%d signatures, one trusted: %v", envelope.MaxSignatures, err)
	}
	_, _, err := decide.LoadVerified(verifySeal(table.PayloadType, payload, keys...), verifyTrust(trustedK))
	if !errors.Is(err, decide.ErrBadSignature) || !errors.Is(err, envelope.ErrTooManySignatures) {
		t.Fatalf("%d signatures: %v, want ErrBadSignature for ErrTooManySignatures", len(keys), err)
	}
}
