package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// WriteAtomic writes data to path through a temporary file in the same directory,
// synced and renamed into place, and syncs the directory so that the rename
// survives a crash too. On any error the temporary file is removed and path
// is untouched (or, when only the directory's sync failed, holds data).
//
// A directory is refused by name. A path that exists and is not a regular
// file (/dev/null, /dev/stdout, a named pipe) is written in place: renaming over it would replace the device
// or pipe with a file, and there is no partial file to guard against.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	fi, statErr := os.Stat(path)
	if statErr == nil && fi.IsDir() {
		// Renaming a file over a directory fails with a word about the
		// temporary file ("file exists"), not about path.
		return fmt.Errorf("write %s: it is a directory; give the path of the file to write, in it or elsewhere", path)
	}
	if statErr == nil && !fi.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		return f.Close()
	}
	return place(path, data, perm, os.Rename)
}

// CreateAtomic is Write for a file that must not exist yet: the whole file
// appears at path, or nothing does, and a file that exists there, even
// one made a moment before, is never replaced (the error wraps
// fs.ErrExist). The temporary file is linked into place, which fails where
// something exists, instead of renamed over it.
func CreateAtomic(path string, data []byte, perm os.FileMode) error {
	return place(path, data, perm, func(tmp, path string) error {
		if err := os.Link(tmp, path); err != nil {
			return err
		}
		os.Remove(tmp) // the file is in place; a leftover link is harmless
		return nil
	})
}

// place writes data to a synced temporary file beside path and puts it in
// place with put; on any error the temporary file is removed.
func place(path string, data []byte, perm os.FileMode, put func(tmp, path string) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if errors.Is(err, fs.ErrNotExist) {
		// Not the temporary file's name, which says nothing to the caller.
		return fmt.Errorf("write %s: no directory %s: create it first, or write elsewhere: %w", path, filepath.Clean(dir), fs.ErrNotExist)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = put(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: the file is in place, but its directory could not be synced: %w", path, err)
	}
	return nil
}

// syncDir syncs directory dir, so that a file just renamed or linked into
// it stays there after a crash (fsync of the file alone does not promise
// that). Windows has no directory sync: there a rename is as durable as
// the file system makes it.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
