package catalog

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/policyc/policyc/internal/fileio"
)

// FileName is the name of a server's snapshot file in the catalogue
// directory.
func FileName(server string) string { return server + ".json" }

// WriteFile writes the canonical encoding of s to dir/<server>.json,
// atomically, creating dir when needed. A file that already holds exactly
// those bytes is left alone; changed reports whether it was written.
func WriteFile(dir string, s *Snapshot) (changed bool, err error) {
	b, err := Encode(s)
	if err != nil {
		return false, err
	}
	path := filepath.Join(dir, FileName(s.Server))
	if old, err := fileio.ReadRegular(path); err == nil && bytes.Equal(old, b) {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	if err := fileio.WriteAtomic(path, b, 0o644); err != nil {
		return false, err
	}
	return true, nil
}
