package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// checkListenAddress checks that addr is host:port with a port a listener
// can use: a number from 0 to 65535 (0 or none: any free port) or a
// service name such as "http". The host is left to the listener, which
// may have to resolve it.
func checkListenAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if port == "" {
		return nil
	}
	if strings.Trim(port, "0123456789") == "" {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return fmt.Errorf("port %s is out of range: ports are 0 to 65535", port)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q is neither a number from 0 to 65535 nor a known service name", port)
	}
	return nil
}

// sameListener says whether listeners on a and b would take the same port
// of an address they share: the same port (not 0 or empty, which pick a
// free one) on the same host, or on a host where either listens on every
// address.
func sameListener(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil {
		return false
	}
	na, err1 := net.LookupPort("tcp", pa)
	nb, err2 := net.LookupPort("tcp", pb)
	if err1 != nil || err2 != nil || na == 0 || na != nb {
		return false
	}
	// Go listens on every address of both families for "", "::" and
	// 0.0.0.0 alike. One address written two ways is one address; a name
	// is compared as written.
	if Wildcard(ha) || Wildcard(hb) {
		return true
	}
	if ipa, ipb := net.ParseIP(ha), net.ParseIP(hb); ipa != nil && ipb != nil {
		return ipa.Equal(ipb)
	}
	return ha == hb
}

// Wildcard says whether a listener on host listens on every address: Go
// does for "", "::" and 0.0.0.0 alike.
func Wildcard(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

// Loopback says whether a listener on host is reached from this machine
// alone: localhost or a loopback address.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// checkStateDir tells whether dir is a directory the gateway can keep its
// state in. The gateway never creates it: a state directory that is gone
// must not become a fresh start that accepts an older table. With probe
// (for --check), that the gateway may create files in it is tried too,
// with a temporary file removed at once.
func checkStateDir(dir string, probe bool) error {
	if dir == "" {
		return errors.New("an empty path names no directory")
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the directory %s does not exist", dir)
	case err != nil:
		return unwrapPath(err)
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case !probe:
		return nil
	}
	f, err := os.CreateTemp(dir, ".policyc-gateway-check-")
	if err != nil {
		return &notWritableError{fmt.Errorf("the gateway cannot create files in %s: %w", dir, unwrapPath(err))}
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// notWritableError is a state directory that exists but the gateway
// cannot write to.
type notWritableError struct{ error }

func (e *notWritableError) Unwrap() error { return e.error }

// checkDecisionLog tells whether the gateway will be able to append to its
// decision log, without creating the file or writing to it: its directory
// exists, a regular file can be opened for appending and, with probe (for
// --check), one that does not exist yet can be created in that directory
// (tried with a temporary file, removed at once). A pipe or a device is
// not opened: that could block, or end a reader's input.
func checkDecisionLog(path string, probe bool) error {
	// A symbolic link is appended to through its target, which the
	// gateway creates when it does not exist yet.
	for range 8 {
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the directory %s does not exist", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	st, err = os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return fmt.Errorf("%s is a directory, not a file", path)
	case err == nil && !st.Mode().IsRegular():
		// A pipe or a device: opening it may block until a reader comes,
		// or consume the reader's end of file. The start opens it.
		return nil
	case err == nil:
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("cannot append to %s: %w", path, unwrapPath(err))
		}
		return f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	case !probe:
		return nil // the start creates it, and says so if it cannot
	}
	// The file does not exist yet: the gateway creates it. Whether it may
	// is only known by trying, in the directory, under another name.
	f, err := os.CreateTemp(dir, ".policyc-gateway-check-")
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", path, unwrapPath(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// unwrapPath drops the operation and path of a *fs.PathError, for a
// message that names the path itself.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// findProgram resolves an upstream's program: a bare name in PATH, or a
// path (relative ones to the configuration's directory).
func findProgram(prog, dir string) (string, error) {
	if !strings.ContainsRune(prog, filepath.Separator) && !strings.Contains(prog, "/") {
		p, err := exec.LookPath(prog)
		if err != nil {
			return prog, fmt.Errorf("program %q is not found in PATH", prog)
		}
		return p, nil
	}
	p, err := filepath.Abs(filepath.Join(dir, prog))
	if filepath.IsAbs(prog) {
		p, err = prog, nil
	}
	if err != nil {
		return prog, err
	}
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return p, fmt.Errorf("program %s does not exist (a relative path is relative to the configuration's directory)", prog)
	case st.IsDir() || st.Mode()&0o111 == 0:
		return p, fmt.Errorf("%s is not an executable program", prog)
	}
	return p, nil
}
