package fileio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(path, []byte("new content"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "new content" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".out.json.tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestWriteMissingDirectoryLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := WriteAtomic(filepath.Join(dir, "no", "such", "out.json"), []byte("x"), 0o644); err == nil {
		t.Fatal("no error for a missing directory")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
}

// TestWriteDevice: a device such as /dev/null is written in place, never
// replaced by a renamed file.
func TestWriteDevice(t *testing.T) {
	before, err := os.Stat(os.DevNull)
	if err != nil || before.Mode().IsRegular() {
		t.Skipf("%s is not a device here", os.DevNull)
	}
	if err := WriteAtomic(os.DevNull, []byte("discarded"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(os.DevNull)
	if err != nil || after.Mode() != before.Mode() {
		t.Fatalf("%s changed: %v -> %v (%v)", os.DevNull, before.Mode(), after.Mode(), err)
	}
}

// TestWriteDirectory: a directory is refused by its own name, and left as
// it was, with no temporary file in or beside it.
func TestWriteDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteAtomic(dir, []byte("x"), 0o644)
	if err == nil || err.Error() != "write "+dir+": it is a directory; give the path of the file to write, in it or elsewhere" {
		t.Fatalf("error %v", err)
	}
	for _, d := range []string{parent, dir} {
		entries, _ := os.ReadDir(d)
		if d == parent && len(entries) != 1 || d == dir && len(entries) != 0 {
			t.Fatalf("%s holds %v", d, entries)
		}
	}
}

// Create puts a whole new file in place, and never replaces one that
// exists, whatever it is; nothing temporary is left either way.
func TestCreateNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ci.key")
	if err := CreateAtomic(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created file: %v %v", fi, err)
	}
	if err := CreateAtomic(path, []byte("second"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over an existing file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Fatalf("the existing file now holds %q", b)
	}
	link := filepath.Join(dir, "dangling.key")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), link); err != nil {
		t.Fatal(err)
	}
	if err := CreateAtomic(link, []byte("x"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over a dangling link: %v, want fs.ErrExist", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("Create wrote through a link")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
