//go:build unix

package compiler_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/policyc/policyc/compiler"
)

// TestReadDirSpecialFiles: a .cue name in the policy directory that is not
// a regular file is refused with its name and what to do, never read: a
// named pipe would block forever. Directories, and symbolic links to
// them, are skipped; a symbolic link to a file is read.
func TestReadDirSpecialFiles(t *testing.T) {
	policy := []byte("package policy\n")
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.cue"), policy, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("fifo", func(t *testing.T) {
		dir := setup(t)
		if err := syscall.Mkfifo(filepath.Join(dir, "pipe.cue"), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		done := make(chan error, 1)
		go func() { _, err := ReadDir(dir); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "pipe.cue: is a named pipe, not a regular file") || !strings.Contains(err.Error(), "rename it") {
				t.Fatalf("error %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ReadDir blocked on a named pipe")
		}
	})
	t.Run("dangling link", func(t *testing.T) {
		dir := setup(t)
		if err := os.Symlink("gone.cue", filepath.Join(dir, "link.cue")); err != nil {
			t.Fatal(err)
		}
		_, err := ReadDir(dir)
		if err == nil || !strings.Contains(err.Error(), "link.cue: is a symbolic link to gone.cue, which does not exist") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("directories", func(t *testing.T) {
		dir := setup(t)
		if err := os.Mkdir(filepath.Join(dir, "sub.cue"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(".", filepath.Join(dir, "loop.cue")); err != nil {
			t.Fatal(err)
		}
		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "b.cue"), policy, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(other, "b.cue"), filepath.Join(dir, "b.cue")); err != nil {
			t.Fatal(err)
		}
		files, err := ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range files {
			names = append(names, f.Name)
		}
		if strings.Join(names, " ") != "a.cue b.cue" {
			t.Fatalf("read %v, want a.cue b.cue", names)
		}
	})
}
