//go:build !unix

package decide

// lockState does nothing on this platform: give each gateway its own state
// directory, and do not run policyc verify --state on it while it reloads.
func lockState(dir string) (unlock func(), err error) { return func() {}, nil }
