package envelope

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The test vector of the DSSE spec (protocol.md).
func TestPAEVector(t *testing.T) {
	got := PAE("http://example.com/HelloWorld", []byte("hello world"))
	want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"
	if string(got) != want {
		t.Fatalf("PAE = %q, want %q", got, want)
	}
}

func TestPAELengthsAreBytes(t *testing.T) {
	got := PAE("t/é", []byte{})
	if want := "DSSEv1 4 t/é 0 "; string(got) != want {
		t.Fatalf("PAE = %q, want %q", got, want)
	}
}

func newKey(t testing.TB, seed byte) ed25519.PrivateKey {
	t.Helper()
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func TestSignMarshalParseVerify(t *testing.T) {
	k := newKey(t, 1)
	e := &Envelope{PayloadType: "application/x-test", Payload: []byte("payload bytes\n")}
	e.Sign(k)
	b := e.Marshal()
	if !bytes.Equal(b, e.Marshal()) {
		t.Fatal("Marshal is not deterministic")
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.PayloadType != e.PayloadType || !bytes.Equal(got.Payload, e.Payload) || len(got.Signatures) != 1 {
		t.Fatalf("round trip changed the envelope: %+v", got)
	}
	if got.Signatures[0].KeyID != KeyID(pub(k)) {
		t.Fatalf("keyid = %q, want %q", got.Signatures[0].KeyID, KeyID(pub(k)))
	}
	ids, err := got.Verify([]ed25519.PublicKey{pub(k)})
	if err != nil || len(ids) != 1 || ids[0] != KeyID(pub(k)) {
		t.Fatalf("Verify = %v, %v", ids, err)
	}
	if !ed25519.Verify(pub(k), PAE(e.PayloadType, e.Payload), got.Signatures[0].Sig) {
		t.Fatal("the signature is not over PAE(payloadType, payload)")
	}
}

// Every base64 spelling DSSE allows decodes to the same envelope.
func TestParseBase64Alphabets(t *testing.T) {
	payload := []byte{0xfb, 0xff, 0xfe, 0x00, 0x3e, 0x3f} // '+' and '/' in std, '-' and '_' in URL-safe
	k := newKey(t, 2)
	e := &Envelope{PayloadType: "application/x-test", Payload: payload}
	e.Sign(k)
	encs := map[string]*base64.Encoding{
		"std": base64.StdEncoding, "rawstd": base64.RawStdEncoding,
		"url": base64.URLEncoding, "rawurl": base64.RawURLEncoding,
	}
	for name, enc := range encs {
		t.Run(name, func(t *testing.T) {
			doc := fmt.Sprintf(`{"payload":%q,"payloadType":"application/x-test","signatures":[{"keyid":"","sig":%q}]}`,
				enc.EncodeToString(payload), enc.EncodeToString(e.Signatures[0].Sig))
			got, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Payload, payload) {
				t.Fatalf("payload = %x, want %x", got.Payload, payload)
			}
			if _, err := got.Verify([]ed25519.PublicKey{pub(k)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseRefusals(t *testing.T) {
	sig := base64.StdEncoding.EncodeToString(make([]byte, 64))
	ok := fmt.Sprintf(`{"payload":"aGk=","payloadType":"t","signatures":[{"keyid":"k","sig":%q}]}`, sig)
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("the base document must parse: %v", err)
	}
	cases := map[string]string{
		"empty":                  ``,
		"truncated":              ok[:len(ok)/2],
		"not an object":          `[]`,
		"trailing data":          ok + `{}`,
		"missing payloadType":    `{"payload":"aGk=","signatures":[]}`,
		"missing payload":        `{"payloadType":"t","signatures":[]}`,
		"missing signatures":     `{"payload":"aGk=","payloadType":"t"}`,
		"signatures null":        `{"payload":"aGk=","payloadType":"t","signatures":null}`,
		"signatures not array":   `{"payload":"aGk=","payloadType":"t","signatures":{}}`,
		"payload not string":     `{"payload":5,"payloadType":"t","signatures":[]}`,
		"payloadType null":       `{"payload":"aGk=","payloadType":null,"signatures":[]}`,
		"bad base64":             `{"payload":"a*k=","payloadType":"t","signatures":[]}`,
		"mixed alphabets":        `{"payload":"+-==","payloadType":"t","signatures":[]}`,
		"non-zero padding bits":  `{"payload":"aGl=","payloadType":"t","signatures":[]}`,
		"line break in base64":   `{"payload":"aG\nk=","payloadType":"t","signatures":[]}`,
		"duplicate payload":      `{"payload":"aGk=","payload":"aGk=","payloadType":"t","signatures":[]}`,
		"case-folded name only":  `{"Payload":"aGk=","payloadType":"t","signatures":[]}`,
		"case-folded beside":     `{"payload":"aGk=","PAYLOAD":"eA==","payloadType":"t","signatures":[]}`,
		"case-folded type":       `{"payload":"aGk=","payloadtype":"u","payloadType":"t","signatures":[]}`,
		"case-folded signatures": `{"payload":"aGk=","payloadType":"t","signatures":[],"Signatures":[]}`,
		"kelvin-folded keyid":    fmt.Sprintf(`{"payload":"aGk=","payloadType":"t","signatures":[{"\u212aeyid":"x","sig":%q}]}`, sig),
		"case-folded sig":        fmt.Sprintf(`{"payload":"aGk=","payloadType":"t","signatures":[{"sig":%q,"Sig":%q}]}`, sig, sig),
		"signature without sig":  `{"payload":"aGk=","payloadType":"t","signatures":[{"keyid":"k"}]}`,
		"signature not object":   `{"payload":"aGk=","payloadType":"t","signatures":["x"]}`,
		"duplicate sig":          fmt.Sprintf(`{"payload":"aGk=","payloadType":"t","signatures":[{"sig":%q,"sig":%q}]}`, sig, sig),
		"keyid not string":       fmt.Sprintf(`{"payload":"aGk=","payloadType":"t","signatures":[{"keyid":1,"sig":%q}]}`, sig),
		"no envelope fields":     `{"format":"policyc.table/v1"}`,
		"invalid json in object": `{"payload":"aGk=",}`,
		"byte order mark":        "\xef\xbb\xbf" + ok,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := Parse([]byte(doc))
			if err == nil {
				t.Fatalf("parsed %q as %+v", doc, e)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if name == "no envelope fields" != errors.Is(err, ErrNotEnvelope) {
				t.Fatalf("ErrNotEnvelope mismatch: %v", err)
			}
		})
	}
}

// DSSE: consumers must ignore unrecognised fields, and keyid is optional.
func TestParseIgnoresUnknownFields(t *testing.T) {
	k := newKey(t, 3)
	e := &Envelope{PayloadType: "t", Payload: []byte("x")}
	e.Sign(k)
	doc := fmt.Sprintf(`{"extra":{"a":[1,2]},"payload":"eA==","payloadType":"t","signatures":[{"sig":%q,"note":null}]}`,
		base64.StdEncoding.EncodeToString(e.Signatures[0].Sig))
	got, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got.Signatures[0].KeyID != "" {
		t.Fatalf("keyid = %q", got.Signatures[0].KeyID)
	}
	if _, err := got.Verify([]ed25519.PublicKey{pub(k)}); err != nil {
		t.Fatalf("a signature without keyid must still verify: %v", err)
	}
}

// Rotation: an envelope signed by the old and the new key verifies for a
// verifier trusting either, both, or neither.
func TestVerifyRotation(t *testing.T) {
	oldK, newK, other := newKey(t, 10), newKey(t, 11), newKey(t, 12)
	e := &Envelope{PayloadType: "t", Payload: []byte("table")}
	e.Sign(oldK)
	e.Sign(newK)
	cases := []struct {
		name    string
		trusted []ed25519.PublicKey
		want    []string
	}{
		{"old only", []ed25519.PublicKey{pub(oldK)}, []string{KeyID(pub(oldK))}},
		{"new only", []ed25519.PublicKey{pub(newK)}, []string{KeyID(pub(newK))}},
		{"both", []ed25519.PublicKey{pub(newK), pub(oldK)}, []string{KeyID(pub(oldK)), KeyID(pub(newK))}},
	}
	for _, c := range cases {
		ids, err := e.Verify(c.trusted)
		if err != nil || strings.Join(ids, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: Verify = %v, %v; want %v", c.name, ids, err, c.want)
		}
	}
	_, err := e.Verify([]ed25519.PublicKey{pub(other)})
	var ue *UntrustedError
	if !errors.As(err, &ue) || len(ue.KeyIDs) != 2 {
		t.Fatalf("neither trusted: err = %v, want *UntrustedError naming both signers", err)
	}
}

// The keyid is a hint: a lying keyid does not stop a valid signature, and a
// keyid naming a trusted key does not make an invalid one count.
func TestVerifyKeyIDIsOnlyAHint(t *testing.T) {
	k, other := newKey(t, 20), newKey(t, 21)
	e := &Envelope{PayloadType: "t", Payload: []byte("table")}
	e.Sign(k)
	e.Signatures[0].KeyID = KeyID(pub(other))
	ids, err := e.Verify([]ed25519.PublicKey{pub(other), pub(k)})
	if err != nil || len(ids) != 1 || ids[0] != KeyID(pub(k)) {
		t.Fatalf("wrong hint: Verify = %v, %v; want the real signer", ids, err)
	}

	forged := &Envelope{PayloadType: "t", Payload: []byte("table")}
	forged.Sign(other)
	forged.Signatures[0].KeyID = KeyID(pub(k))
	_, err = forged.Verify([]ed25519.PublicKey{pub(k)})
	var be *BadSignatureError
	if !errors.As(err, &be) {
		t.Fatalf("signature by an untrusted key claiming a trusted keyid: err = %v, want *BadSignatureError", err)
	}
}

func TestVerifyTamperedAndEmpty(t *testing.T) {
	k := newKey(t, 30)
	e := &Envelope{PayloadType: "t", Payload: []byte("table")}
	e.Sign(k)
	e.Payload = []byte("tablE")
	var be *BadSignatureError
	if _, err := e.Verify([]ed25519.PublicKey{pub(k)}); !errors.As(err, &be) {
		t.Fatalf("tampered payload: err = %v", err)
	}
	e.Payload = []byte("table")
	e.PayloadType = "u"
	if _, err := e.Verify([]ed25519.PublicKey{pub(k)}); !errors.As(err, &be) {
		t.Fatalf("changed payloadType: err = %v", err)
	}
	empty := &Envelope{PayloadType: "t", Payload: []byte("table"), Signatures: []Signature{}}
	if _, err := empty.Verify([]ed25519.PublicKey{pub(k)}); !errors.Is(err, ErrNoSignatures) {
		t.Fatalf("no signatures: err = %v", err)
	}
	short := &Envelope{PayloadType: "t", Payload: []byte("table"), Signatures: []Signature{{KeyID: KeyID(pub(k)), Sig: []byte{1, 2}}}}
	if _, err := short.Verify([]ed25519.PublicKey{pub(k)}); !errors.As(err, &be) {
		t.Fatalf("short signature: err = %v", err)
	}
}

func TestKeyIDIsSHA256OfPKIX(t *testing.T) {
	k := newKey(t, 40)
	der, err := x509.MarshalPKIXPublicKey(pub(k))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	if got, want := KeyID(pub(k)), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("KeyID = %s, want %s", got, want)
	}
	if KeyID(pub(k)) == KeyID(pub(newKey(t, 41))) {
		t.Fatal("two keys share an id")
	}
}

func TestKeysRoundTrip(t *testing.T) {
	k := newKey(t, 50)
	privPEM, err := MarshalPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := MarshalPublicKey(pub(k))
	if err != nil {
		t.Fatal(err)
	}
	gotK, err := ParsePrivateKey(privPEM)
	if err != nil || !gotK.Equal(k) {
		t.Fatalf("ParsePrivateKey = %v, %v", gotK, err)
	}
	gotP, err := ParsePublicKey(pubPEM)
	if err != nil || !gotP.Equal(pub(k)) {
		t.Fatalf("ParsePublicKey = %v, %v", gotP, err)
	}
	// Text around the block (a comment) is fine.
	if _, err := ParsePublicKey(append([]byte("# CI signing key\n"), pubPEM...)); err != nil {
		t.Fatal(err)
	}
}

func TestKeyRefusals(t *testing.T) {
	k := newKey(t, 60)
	privPEM, _ := MarshalPrivateKey(k)
	pubPEM, _ := MarshalPublicKey(pub(k))
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	ecPubDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecPubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecPubDER})
	rsaK, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaK)})
	truncated := privPEM[:len(privPEM)-20]
	garbled := bytes.Replace(privPEM, []byte("MC4C"), []byte("MC5C"), 1)
	two := append(append([]byte{}, pubPEM...), pubPEM...)

	private := []struct {
		name, in, want string
	}{
		{"empty", "", "empty key"},
		{"not PEM", "hello", "no PEM block"},
		{"truncated", string(truncated), "no PEM block"},
		{"garbled DER", string(garbled), "does not parse"},
		{"public key", string(pubPEM), "this is a public key"},
		{"ECDSA PKCS8", string(ecPEM), "an ECDSA key, not an Ed25519 key"},
		{"RSA PKCS1", string(rsaPEM), "not an Ed25519 key"},
		// OpenSSH's container hides the key type: the message blames the
		// format, not the algorithm.
		{"OpenSSH", string(pem.EncodeToMemory(&pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: []byte("openssh-key-v1\x00")})), "a private key in OpenSSH's format"},
		{"two blocks", string(append(append([]byte{}, privPEM...), privPEM...)), "more than one PEM block"},
	}
	for _, c := range private {
		_, err := ParsePrivateKey([]byte(c.in))
		var ke *KeyError
		if !errors.As(err, &ke) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePrivateKey(%s) = %v, want a KeyError containing %q", c.name, err, c.want)
		}
	}
	public := []struct {
		name, in, want string
	}{
		{"private key", string(privPEM), "this is a private key"},
		{"ECDSA", string(ecPubPEM), "an ECDSA key, not an Ed25519 key"},
		{"two blocks", string(two), "more than one PEM block"},
		{"certificate", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})), "unexpected PEM block"},
	}
	for _, c := range public {
		_, err := ParsePublicKey([]byte(c.in))
		var ke *KeyError
		if !errors.As(err, &ke) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePublicKey(%s) = %v, want a KeyError containing %q", c.name, err, c.want)
		}
	}
}

// FuzzParse: whatever Parse accepts survives Marshal and Parse unchanged,
// and no envelope verifies unless a signature really covers its payload.
func FuzzParse(f *testing.F) {
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	e := &Envelope{PayloadType: "application/x-test", Payload: []byte(`{"a":1}`)}
	e.Sign(k)
	f.Add(e.Marshal())
	f.Add([]byte(`{"payload":"","payloadType":"","signatures":[]}`))
	f.Add([]byte(`{"payload":"-_8","payloadType":"t","signatures":[{"sig":"AA"}],"x":1}`))
	trusted := []ed25519.PublicKey{k.Public().(ed25519.PublicKey)}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse error %v does not wrap ErrMalformed", err)
			}
			return
		}
		again, err := Parse(got.Marshal())
		if err != nil {
			t.Fatalf("re-parse of Marshal output: %v", err)
		}
		if again.PayloadType != got.PayloadType || !bytes.Equal(again.Payload, got.Payload) || len(again.Signatures) != len(got.Signatures) {
			t.Fatalf("Marshal/Parse changed the envelope")
		}
		for i := range got.Signatures {
			if again.Signatures[i].KeyID != got.Signatures[i].KeyID || !bytes.Equal(again.Signatures[i].Sig, got.Signatures[i].Sig) {
				t.Fatalf("Marshal/Parse changed signature %d", i)
			}
		}
		if _, err := got.Verify(trusted); err == nil {
			msg := PAE(got.PayloadType, got.Payload)
			ok := false
			for _, s := range got.Signatures {
				ok = ok || ed25519.Verify(trusted[0], msg, s.Sig)
			}
			if !ok {
				t.Fatal("Verify accepted an envelope no signature of which verifies")
			}
		}
	})
}

// FuzzScanner holds the hand-written JSON scanner to encoding/json: it
// accepts a document exactly when json.Valid does (up to its nesting
// limit).
func FuzzScanner(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `""`, `"a\"b\\"`, `"\u00e9"`, `"\x"`, `{"a":[1,-2.5e3,true,false,null,{"b":"c"}]}`,
		`{"a":1,}`, `[1 2]`, "\"\x01\"", `01`, `1.`, `-`, `{"a" 1}`, `  [ ]  `, `nul`, "\"\xff\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &scanner{b: b}
		err := s.value(0)
		s.ws()
		ok := err == nil && s.i == len(b)
		if err != nil && strings.Contains(err.Error(), "nested more than") {
			return
		}
		if ok != json.Valid(b) {
			t.Fatalf("scanner says %v (%v), json.Valid says %v, for %q", ok, err, json.Valid(b), b)
		}
	})
}

// FuzzParseAgreesWithJSON: an envelope Parse accepts is valid JSON whose
// fields, read by encoding/json, are the ones Parse returned.
func FuzzParseAgreesWithJSON(f *testing.F) {
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, 32))
	e := &Envelope{PayloadType: "application/x-t\u00e9st", Payload: []byte("\x00\xff payload")}
	e.Sign(k)
	f.Add(e.Marshal())
	f.Add([]byte(`{"payload":"aGk","payloadType":"\u0074","signatures":[{"sig":"","keyid":"\ud83d\ude00"}],"x":[{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Parse(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("Parse accepted invalid JSON %q", b)
		}
		// Field names match exactly in Parse, so compare through maps
		// (encoding/json's struct decoding folds case).
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("encoding/json refuses what Parse accepted: %v", err)
		}
		var pt string
		if err := json.Unmarshal(doc["payloadType"], &pt); err != nil || pt != got.PayloadType {
			t.Fatalf("payloadType: encoding/json %q (%v), Parse %q", pt, err, got.PayloadType)
		}
		var sigs []map[string]json.RawMessage
		if err := json.Unmarshal(doc["signatures"], &sigs); err != nil || len(sigs) != len(got.Signatures) {
			t.Fatalf("signatures: encoding/json %d (%v), Parse %d", len(sigs), err, len(got.Signatures))
		}
		for i, sig := range sigs {
			var id string
			if raw, ok := sig["keyid"]; ok {
				if err := json.Unmarshal(raw, &id); err != nil {
					t.Fatal(err)
				}
			}
			if id != got.Signatures[i].KeyID {
				t.Fatalf("keyid %d: encoding/json %q, Parse %q", i, id, got.Signatures[i].KeyID)
			}
		}
	})
}
