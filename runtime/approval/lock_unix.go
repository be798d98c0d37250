//go:build unix

package approval

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive lock on path for as long as the returned file
// is open: two gateways writing one store would lose decisions.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the approval store: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("the approval store in %s is in use by another gateway; give each gateway its own state_dir", path[:len(path)-len(lockFile)-1])
		}
		return nil, fmt.Errorf("lock the approval store: %w", err)
	}
	return f, nil
}
