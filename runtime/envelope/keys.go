package envelope

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
)

// PEM block types of the key files policyc writes.
const (
	privateKeyBlock = "PRIVATE KEY" // PKCS #8
	publicKeyBlock  = "PUBLIC KEY"  // PKIX SubjectPublicKeyInfo
)

// KeyID is the id of a public key: "sha256:" and the hex SHA-256 of the
// key's PKIX (SubjectPublicKeyInfo) DER encoding, the bytes inside the
// PEM file keygen writes. Anyone holding the public key can recompute it:
//
//	openssl pkey -pubin -in NAME.pub -outform DER | sha256sum
func KeyID(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		// Only for a key of the wrong length; name it rather than panic.
		return "sha256:invalid-key"
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// KeyError reports key material that cannot be used: bad PEM, the wrong
// kind of key (public for private or the reverse), or a key that is not
// Ed25519.
type KeyError struct {
	Reason string
}

func (e *KeyError) Error() string { return e.Reason }

func keyErrorf(format string, args ...any) error {
	return &KeyError{Reason: fmt.Sprintf(format, args...)}
}

// MarshalPrivateKey encodes key as a PKCS #8 PEM block.
func MarshalPrivateKey(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: privateKeyBlock, Bytes: der}), nil
}

// MarshalPublicKey encodes pub as a PKIX PEM block.
func MarshalPublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: publicKeyBlock, Bytes: der}), nil
}

// ParsePrivateKey reads an Ed25519 private key from a PKCS #8 PEM block,
// the format keygen writes. The error, a *KeyError, says what was found
// instead when it is something else.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, err := onePEMBlock(data)
	if err != nil {
		return nil, err
	}
	switch block.Type {
	case privateKeyBlock:
	case publicKeyBlock:
		return nil, keyErrorf("this is a public key (PEM %q); signing needs the private key (the .key file keygen wrote)", block.Type)
	case "ENCRYPTED PRIVATE KEY":
		return nil, keyErrorf("this private key is encrypted; policyc reads unencrypted PKCS #8 keys (keep it in a CI secret instead)")
	case "OPENSSH PRIVATE KEY":
		// The type of key inside is not in the PEM header: it may well be
		// Ed25519. The container is what policyc does not read.
		return nil, keyErrorf("this is a private key in OpenSSH's format (PEM %q); policyc reads Ed25519 keys in PKCS #8 PEM: create one with 'policyc keygen' (or 'openssl genpkey -algorithm ed25519')", block.Type)
	case "RSA PRIVATE KEY", "EC PRIVATE KEY", "DSA PRIVATE KEY":
		return nil, keyErrorf("this is not an Ed25519 key (PEM %q); policyc signs with Ed25519 only: create a key with 'policyc keygen'", block.Type)
	default:
		return nil, keyErrorf("unexpected PEM block %q; expected %q (an Ed25519 key in PKCS #8, as 'policyc keygen' writes)", block.Type, privateKeyBlock)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, keyErrorf("the PKCS #8 private key does not parse: %v", err)
	}
	ed, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, keyErrorf("this is %s, not an Ed25519 key; policyc signs with Ed25519 only: create a key with 'policyc keygen'", describeKey(key))
	}
	return ed, nil
}

// ParsePublicKey reads an Ed25519 public key from a PKIX PEM block, the
// format keygen writes. A private key is refused: a gateway must never be
// given the signing key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	block, err := onePEMBlock(data)
	if err != nil {
		return nil, err
	}
	switch block.Type {
	case publicKeyBlock:
	case privateKeyBlock, "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "DSA PRIVATE KEY", "OPENSSH PRIVATE KEY":
		return nil, keyErrorf("this is a private key (PEM %q); trust takes a public key (the .pub file keygen wrote). A private key never belongs on a gateway", block.Type)
	default:
		return nil, keyErrorf("unexpected PEM block %q; expected %q (an Ed25519 public key, as 'policyc keygen' writes)", block.Type, publicKeyBlock)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, keyErrorf("the public key does not parse: %v", err)
	}
	ed, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, keyErrorf("this is %s, not an Ed25519 key; policyc tables are signed with Ed25519 only", describeKey(key))
	}
	return ed, nil
}

// onePEMBlock returns the only PEM block in data. Text around the block is
// allowed (comments); a second block is not, since only one key is read.
func onePEMBlock(data []byte) (*pem.Block, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, keyErrorf("empty key: expected a PEM block")
		}
		return nil, keyErrorf("no PEM block found (expected -----BEGIN ...----- / -----END ...----- lines; truncated or not a key file?)")
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, keyErrorf("more than one PEM block; a key file holds exactly one key")
	}
	return block, nil
}

func describeKey(key any) string {
	switch k := key.(type) {
	case *ecdsa.PrivateKey, *ecdsa.PublicKey:
		return "an ECDSA key"
	case *rsa.PrivateKey, *rsa.PublicKey:
		return "an RSA key"
	case *ecdh.PrivateKey, *ecdh.PublicKey:
		return "an X25519/ECDH key"
	default:
		return fmt.Sprintf("a %T key", k)
	}
}
