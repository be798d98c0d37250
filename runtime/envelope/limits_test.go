package envelope

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func signedBy(t testing.TB, n int, payload []byte) *Envelope {
	t.Helper()
	e := &Envelope{PayloadType: "application/vnd.policyc.table.v1+json", Payload: payload}
	for range n {
		_, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		e.Sign(key)
	}
	return e
}

func TestParseSignatureLimit(t *testing.T) {
	ok := signedBy(t, MaxSignatures, []byte("{}"))
	if err := ok.CheckLimits(); err != nil {
		t.Fatalf("CheckLimits on %d signatures: %v", MaxSignatures, err)
	}
	got, err := Parse(ok.Marshal())
	if err != nil || len(got.Signatures) != MaxSignatures {
		t.Fatalf("Parse with %d signatures: %v, %d signatures", MaxSignatures, err, len(got.Signatures))
	}

	over := signedBy(t, MaxSignatures+1, []byte("{}"))
	_, err = Parse(over.Marshal())
	if !errors.Is(err, ErrTooManySignatures) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("Parse with %d signatures: %v, want ErrTooManySignatures wrapping ErrMalformed", MaxSignatures+1, err)
	}
	if !strings.Contains(err.Error(), "signatures[8]") || !strings.Contains(err.Error(), "at most 8") {
		t.Errorf("the refusal does not name the signature and the limit: %v", err)
	}
	if err := over.CheckLimits(); !errors.Is(err, ErrTooManySignatures) {
		t.Errorf("CheckLimits on %d signatures: %v, want ErrTooManySignatures", MaxSignatures+1, err)
	}
}

// smallLimit lowers the size limit to 1 KiB for one test, so that inputs
// past it stay small; the checks read the limit, whatever it is.
func smallLimit(t *testing.T) {
	maxSize = 1 << 10
	t.Cleanup(func() { maxSize = MaxSize })
}

func TestParseSizeLimit(t *testing.T) {
	smallLimit(t)
	b := make([]byte, maxSize+1)
	_, err := Parse(b)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("Parse of %d bytes: %v, want ErrTooLarge wrapping ErrMalformed", len(b), err)
	}
	big := &Envelope{PayloadType: "t", Payload: make([]byte, maxSize)}
	if err := big.CheckLimits(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("CheckLimits on a %d-byte payload: %v, want ErrTooLarge", maxSize, err)
	}
	if err := (&Envelope{PayloadType: "t", Payload: make([]byte, maxSize/2)}).CheckLimits(); err != nil {
		t.Errorf("CheckLimits on a %d-byte payload: %v", maxSize/2, err)
	}
}

// endless is an input that never ends, counting what was read of it.
type endless struct{ n int64 }

func (r *endless) Read(p []byte) (int, error) {
	r.n += int64(len(p))
	return len(p), nil
}

func TestReadStopsAtTheLimit(t *testing.T) {
	smallLimit(t)
	r := &endless{}
	_, err := Read(r)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Read of an endless input: %v, want ErrTooLarge", err)
	}
	if r.n > maxSize+1+bytes.MinRead*2 {
		t.Errorf("Read took %d bytes of an endless input, want about %d", r.n, maxSize+1)
	}
	b, err := Read(io.LimitReader(r, maxSize))
	if err != nil || int64(len(b)) != maxSize {
		t.Errorf("Read of exactly the limit: %d bytes, %v", len(b), err)
	}
}

func TestReadFileRefusesBySize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the size is known without any data written.
	if err := f.Truncate(200 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = ReadFile(path)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "209715200 bytes") {
		t.Fatalf("ReadFile of a 200 MiB file: %v, want ErrTooLarge naming the file and its size", err)
	}
	small := signedBy(t, 1, []byte("{}")).Marshal()
	if err := os.WriteFile(path, small, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(path); err != nil || !bytes.Equal(b, small) {
		t.Errorf("ReadFile of a small envelope: %v", err)
	}
}

// BenchmarkVerifyWorstCase is the most verification work an envelope
// within the limits can ask for with four trusted keys: MaxSignatures
// signatures, each by no trusted key and hinting none, over a 1 MiB
// payload, so every signature is tried against every key.
func BenchmarkVerifyWorstCase(b *testing.B) {
	e := signedBy(b, MaxSignatures, make([]byte, 1<<20))
	for i := range e.Signatures {
		e.Signatures[i].KeyID = ""
	}
	var trusted []ed25519.PublicKey
	for range 4 {
		pub, _, err := ed25519.GenerateKey(nil)
		if err != nil {
			b.Fatal(err)
		}
		trusted = append(trusted, pub)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Verify(trusted); err == nil {
			b.Fatal("verified with keys that did not sign")
		}
	}
}
