//go:build unix

package decide

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockState holds an exclusive lock on the state directory's lock file
// until unlock is called, waiting for another process (policyc verify
// --state beside a gateway, say) to finish its own check and record.
func lockState(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, stateLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the state directory: %w", err)
	}
	return func() { f.Close() }, nil
}
