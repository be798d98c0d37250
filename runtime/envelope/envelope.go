// Package envelope reads, writes, signs and verifies DSSE envelopes
// (https://github.com/secure-systems-lab/dsse) with Ed25519 keys.
//
// A signed decision table is a DSSE JSON envelope whose payload is the
// table's canonical bytes. A signature covers PAE(payloadType, payload), the
// DSSE pre-authentication encoding, so neither the payload nor its type can
// be changed without breaking every signature.
//
// This package knows nothing about tables: it never interprets a payload.
// Verify only says which trusted keys signed exactly these payload bytes; the
// caller decodes the payload after that, never before. A signature's keyid is
// a hint for choosing the key to try first; trust is decided only by
// verifying against the trusted keys.
package envelope

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/policyc/policyc/internal/jsonerr"
)

// Envelope is a DSSE envelope, decoded: Payload and each Sig are raw bytes.
type Envelope struct {
	PayloadType string
	Payload     []byte
	Signatures  []Signature
}

// Signature is one signature of an envelope.
type Signature struct {
	// KeyID names the signing key (see KeyID). It is not authenticated.
	KeyID string
	// Sig is the Ed25519 signature over PAE(PayloadType, Payload).
	Sig []byte
}

// PAE is the DSSE v1 pre-authentication encoding of a payload and its type:
//
//	"DSSEv1" SP len(type) SP type SP len(payload) SP payload
//
// with lengths as ASCII decimal byte counts. It is what gets signed.
func PAE(payloadType string, payload []byte) []byte {
	var b []byte
	b = make([]byte, 0, len("DSSEv1")+len(payloadType)+len(payload)+24)
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

// ErrMalformed is wrapped by every error Parse returns for bytes that are
// not a well-formed envelope (bad JSON, a truncated file, bad base64, a
// missing or repeated field).
var ErrMalformed = errors.New("malformed envelope")

// ErrNotEnvelope is returned (wrapping ErrMalformed) for a JSON object that
// has none of the envelope's fields; a bare decision table is one.
var ErrNotEnvelope = fmt.Errorf("%w: a JSON object with no payloadType, payload or signatures field is not a DSSE envelope", ErrMalformed)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Parse reads a DSSE JSON envelope. Following the DSSE spec, base64 fields
// may use the standard or the URL-safe alphabet, padded or not, and unknown
// fields are ignored. Parse is stricter than encoding/json where leniency
// could let two readers disagree: field names match exactly (not
// case-insensitively), a field may not appear twice, the required fields
// (payloadType, payload, signatures, and sig in each signature) must be
// present, and nothing may follow the envelope but whitespace. An envelope
// over MaxSize, or with more than MaxSignatures signatures, is refused
// (ErrTooLarge, ErrTooManySignatures) before any signature is decoded past
// the limit.
func Parse(b []byte) (*Envelope, error) {
	if int64(len(b)) > maxSize {
		return nil, tooLarge("the envelope", int64(len(b)))
	}
	if err := jsonerr.CheckStart(b); err != nil {
		return nil, malformed("%v", err)
	}
	s := &scanner{b: b}
	e := &Envelope{}
	var hasType, hasPayload, hasSigs bool
	err := s.object("the file", true, func(name string) error {
		switch name {
		case "payloadType":
			hasType = true
			lit, err := s.str("payloadType", true)
			if err != nil {
				return err
			}
			e.PayloadType = unquote(lit)
		case "payload":
			hasPayload = true
			lit, err := s.str("payload", false)
			if err != nil {
				return err
			}
			if e.Payload, err = decodeBase64(lit, "payload"); err != nil {
				return err
			}
		case "signatures":
			hasSigs = true
			e.Signatures = []Signature{}
			return s.array("signatures", func(i int) error {
				if i == MaxSignatures {
					return fmt.Errorf("%w: signatures[%d]: a policyc envelope carries at most %d signatures (MaxSignatures); sign with fewer keys at once", ErrTooManySignatures, i, MaxSignatures)
				}
				sig, err := s.signature(fmt.Sprintf("signatures[%d]", i))
				e.Signatures = append(e.Signatures, sig)
				return err
			})
		default:
			if err := s.caseVariant("the envelope", name, "payloadType", "payload", "signatures"); err != nil {
				return err
			}
			return s.value(1)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.ws(); s.i != len(b) {
		return nil, s.errorf("data after the envelope's closing brace")
	}
	switch {
	case !hasType && !hasPayload && !hasSigs:
		return nil, ErrNotEnvelope
	case !hasType:
		return nil, malformed("no %q field", "payloadType")
	case !hasPayload:
		return nil, malformed("no %q field", "payload")
	case !hasSigs:
		return nil, malformed("no %q field", "signatures")
	}
	return e, nil
}

// signature reads one element of the signatures array.
func (s *scanner) signature(where string) (Signature, error) {
	var sig Signature
	hasSig := false
	err := s.object(where, true, func(name string) error {
		switch name {
		case "keyid":
			lit, err := s.str(where+".keyid", true)
			if err != nil {
				return err
			}
			sig.KeyID = unquote(lit)
		case "sig":
			hasSig = true
			lit, err := s.str(where+".sig", false)
			if err != nil {
				return err
			}
			if sig.Sig, err = decodeBase64(lit, where+".sig"); err != nil {
				return err
			}
		default:
			if err := s.caseVariant(where, name, "keyid", "sig"); err != nil {
				return err
			}
			return s.value(1)
		}
		return nil
	})
	if err == nil && !hasSig {
		err = malformed("%s: no %q field", where, "sig")
	}
	return sig, err
}

// caseVariant refuses an unknown field whose name is a known one's in
// another case ("Payload", "SIG"): a JSON reader that matches names
// without regard to case (Go's encoding/json) would read it as the known
// field, and so could see another payload or signature than this one.
func (s *scanner) caseVariant(where, name string, known ...string) error {
	for _, k := range known {
		if strings.EqualFold(name, k) {
			return s.errorf("%s: field %q is %q in another case; remove it (the fields are spelt exactly %s)", where, name, k, strings.Join(known, ", "))
		}
	}
	return nil
}

var (
	stdStrict    = base64.StdEncoding.Strict()
	rawStdStrict = base64.RawStdEncoding.Strict()
	urlStrict    = base64.URLEncoding.Strict()
	rawURLStrict = base64.RawURLEncoding.Strict()
)

// decodeBase64 decodes a JSON string holding standard or URL-safe base64,
// padded or not. Strict decoding refuses non-zero padding bits, and line
// breaks (which Go's decoder would otherwise skip) are refused, so each
// byte string has few spellings.
func decodeBase64(lit []byte, where string) ([]byte, error) {
	var s []byte
	if bytes.IndexByte(lit, '\\') < 0 {
		// Without escapes the literal's bytes are the string; base64
		// decoding refuses any byte a JSON string could not hold.
		s = lit[1 : len(lit)-1]
	} else {
		var str string
		if err := json.Unmarshal(lit, &str); err != nil {
			return nil, malformed("%s: %v", where, err)
		}
		s = []byte(str)
	}
	if bytes.IndexByte(s, '\r') >= 0 || bytes.IndexByte(s, '\n') >= 0 {
		return nil, malformed("%s: line break in base64", where)
	}
	enc := stdStrict
	if bytes.IndexByte(s, '-') >= 0 || bytes.IndexByte(s, '_') >= 0 {
		enc = urlStrict
	}
	if !bytes.HasSuffix(s, []byte("=")) && len(s)%4 != 0 {
		if enc == stdStrict {
			enc = rawStdStrict
		} else {
			enc = rawURLStrict
		}
	}
	out := make([]byte, enc.DecodedLen(len(s)))
	n, err := enc.Decode(out, s)
	if err != nil {
		return nil, malformed("%s: invalid base64: %v", where, err)
	}
	return out[:n], nil
}

// jsonEnvelope is the wire form Marshal writes, in the DSSE spec's field
// order.
type jsonEnvelope struct {
	Payload     string          `json:"payload"`
	PayloadType string          `json:"payloadType"`
	Signatures  []jsonSignature `json:"signatures"`
}

type jsonSignature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// Marshal writes the envelope as indented JSON with standard, padded
// base64. The same envelope always gives the same bytes.
func (e *Envelope) Marshal() []byte {
	je := jsonEnvelope{
		Payload:     base64.StdEncoding.EncodeToString(e.Payload),
		PayloadType: e.PayloadType,
		Signatures:  make([]jsonSignature, 0, len(e.Signatures)),
	}
	for _, s := range e.Signatures {
		je.Signatures = append(je.Signatures, jsonSignature{KeyID: s.KeyID, Sig: base64.StdEncoding.EncodeToString(s.Sig)})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(je); err != nil {
		// Only strings and slices of strings: encoding cannot fail.
		panic(err)
	}
	return buf.Bytes()
}

// Sign appends a signature by key over PAE(e.PayloadType, e.Payload), with
// the key's id as the keyid hint. Existing signatures are kept, so an
// envelope can carry the old and the new key's signatures while keys
// rotate.
func (e *Envelope) Sign(key ed25519.PrivateKey) {
	pub := key.Public().(ed25519.PublicKey)
	e.Signatures = append(e.Signatures, Signature{
		KeyID: KeyID(pub),
		Sig:   ed25519.Sign(key, PAE(e.PayloadType, e.Payload)),
	})
}

// ErrNoSignatures: the envelope carries no signature at all.
var ErrNoSignatures = errors.New("the envelope has no signatures")

// BadSignatureError reports that no signature verifies with a trusted key
// while at least one of them claims to be by a trusted key or claims no key
// at all: the payload or a signature was altered after signing.
type BadSignatureError struct {
	// KeyIDs are the keyid hints of the signatures that failed.
	KeyIDs []string
}

func (e *BadSignatureError) Error() string {
	var claimed []string
	for _, id := range e.KeyIDs {
		if id != "" {
			claimed = append(claimed, id)
		}
	}
	if len(claimed) == 0 {
		return "no signature verifies with a trusted key: the payload or its signature was altered after signing, or it was signed by a key that is not trusted"
	}
	return fmt.Sprintf("the signature by trusted key %s does not verify: the payload or the signature was altered after signing", strings.Join(claimed, ", "))
}

// UntrustedError reports an envelope whose signatures all name keys that
// are not trusted, and none of which verifies with a trusted key.
type UntrustedError struct {
	// KeyIDs are the keyid hints of the envelope's signatures.
	KeyIDs []string
	// Trusted are the ids of the trusted keys.
	Trusted []string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("signed only by untrusted key(s) %s; the trusted keys are %s",
		strings.Join(e.KeyIDs, ", "), strings.Join(e.Trusted, ", "))
}

// Verify checks the signatures against the trusted keys and returns the ids
// of the trusted keys that signed PAE(PayloadType, Payload), in signature
// order. It succeeds when at least one signature verifies; signatures by
// other keys are ignored. A keyid only orders the keys tried: a signature
// is accepted only if it verifies with a trusted key, whatever it claims.
//
// On failure the error is ErrNoSignatures, *UntrustedError (every
// signature names a key that is not trusted) or *BadSignatureError.
func (e *Envelope) Verify(trusted []ed25519.PublicKey) ([]string, error) {
	if len(e.Signatures) == 0 {
		return nil, ErrNoSignatures
	}
	ids := make([]string, len(trusted))
	for i, k := range trusted {
		ids[i] = KeyID(k)
	}
	msg := PAE(e.PayloadType, e.Payload)
	var good []string
	claimsTrusted := false
	for _, s := range e.Signatures {
		hint := -1
		for i, id := range ids {
			if s.KeyID != "" && s.KeyID == id {
				hint = i
				claimsTrusted = true
				break
			}
		}
		if s.KeyID == "" {
			claimsTrusted = true
		}
		// The hinted key first, then every other trusted key: a wrong or
		// missing hint never stops a valid signature from counting.
		try := func(i int) bool {
			return len(trusted[i]) == ed25519.PublicKeySize && ed25519.Verify(trusted[i], msg, s.Sig)
		}
		signer := -1
		if hint >= 0 && try(hint) {
			signer = hint
		} else {
			for i := range trusted {
				if i != hint && try(i) {
					signer = i
					break
				}
			}
		}
		if signer >= 0 && !contains(good, ids[signer]) {
			good = append(good, ids[signer])
		}
	}
	if len(good) > 0 {
		return good, nil
	}
	hints := make([]string, len(e.Signatures))
	for i, s := range e.Signatures {
		hints[i] = s.KeyID
	}
	if claimsTrusted {
		var failed []string
		for _, h := range hints {
			if h == "" || contains(ids, h) {
				failed = append(failed, h)
			}
		}
		return nil, &BadSignatureError{KeyIDs: failed}
	}
	return nil, &UntrustedError{KeyIDs: hints, Trusted: ids}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
