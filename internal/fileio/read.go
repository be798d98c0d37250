// Package fileio reads and writes the files the commands handle. It reads
// the files a command finds by listing a directory
// (the .cue files of a policy, the .json snapshots of a catalogue). Such a
// file must be a regular file, or a symbolic link to one: reading a named
// pipe would wait for a writer forever, and a device has no end.
package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrDirectory is the error (in an *fs.PathError) ReadRegular returns for a name
// that leads to a directory (through a symbolic link, or not); a directory
// listing's caller may skip it as it skips the directories themselves.
var ErrDirectory = errors.New("is a directory")

// ReadRegular reads the file at path, refusing anything but a regular file. Its
// errors are *fs.PathError values naming the path; for a file that is not
// a regular one, the error says what it is instead.
func ReadRegular(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		if lst, lerr := os.Lstat(path); lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("is a symbolic link to %s, which does not exist", target)}
			}
			return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("is a symbolic link to %s, which cannot be followed: %v", target, errors.Unwrap(err))}
		}
		return nil, err
	}
	if st.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: ErrDirectory}
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("is %s, not a regular file", Kind(st.Mode()))}
	}
	return os.ReadFile(path)
}

// Kind names what a file of mode m is, for messages: "a named pipe", "a
// device", ...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}
