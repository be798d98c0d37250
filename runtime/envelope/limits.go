package envelope

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Limits on what an envelope may make a reader do. Verification costs
// signatures × trusted keys × payload bytes (each attempt hashes the whole
// payload), and an envelope is read into memory whole, so both are capped
// before any of that work starts.
const (
	// MaxSize is the largest envelope, in bytes, that is read or parsed.
	// The payload is base64 in it, so the largest table it can carry is
	// about three quarters of this.
	MaxSize = 64 << 20
	// MaxSignatures is the most signatures an envelope may carry: enough
	// for a key rotation with several keys signing side by side.
	MaxSignatures = 8
)

// maxSize is MaxSize, but for tests, which lower it to keep their inputs
// small.
var maxSize int64 = MaxSize

// ErrTooLarge is wrapped by the error for an envelope over MaxSize.
var ErrTooLarge = fmt.Errorf("%w: larger than %d bytes", ErrMalformed, MaxSize)

// ErrTooManySignatures is wrapped by the error for an envelope with more
// than MaxSignatures signatures.
var ErrTooManySignatures = fmt.Errorf("%w: more than %d signatures", ErrMalformed, MaxSignatures)

func tooLarge(what string, size int64) error {
	return fmt.Errorf("%w: %s is %d bytes; a policyc envelope is at most %d bytes (MaxSize): this is not a table a policyc compiler signed", ErrTooLarge, what, size, maxSize)
}

// Read reads an envelope from r, refusing one over MaxSize without reading
// more than MaxSize+1 bytes of it.
func Read(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSize+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > maxSize {
		return nil, tooLarge("the input", int64(len(b)))
	}
	return b, nil
}

// ReadFile reads the envelope at path, refusing one over MaxSize by its
// size before reading it (and, for a file whose size the system does not
// know, after reading at most MaxSize+1 bytes).
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > maxSize {
		return nil, tooLarge(path, st.Size())
	}
	b, err := Read(f)
	if errors.Is(err, ErrTooLarge) {
		return nil, tooLarge(path, int64(len(b)))
	}
	return b, err
}

// CheckLimits reports whether a reader would accept the envelope's size and
// signature count; a signer calls it before writing, so that it never
// writes an envelope every verifier refuses.
func (e *Envelope) CheckLimits() error {
	if len(e.Signatures) > MaxSignatures {
		return fmt.Errorf("%w: the envelope would carry %d signatures; a policyc envelope carries at most %d (MaxSignatures): sign with fewer keys at once", ErrTooManySignatures, len(e.Signatures), MaxSignatures)
	}
	if n := len(e.Marshal()); int64(n) > maxSize {
		return fmt.Errorf("%w: the signed envelope would be %d bytes; a policyc envelope is at most %d bytes (MaxSize), so no gateway would load it: split the policy's servers over several gateways", ErrTooLarge, n, maxSize)
	}
	return nil
}
