//go:build !unix

package approval

import (
	"fmt"
	"os"
)

// lockDir creates the lock file; on this platform it does not keep a second
// gateway out, so give each gateway its own state_dir.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the approval store: %w", err)
	}
	return f, nil
}
