package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCobraPrintsDeprecationsOnStdout pins why deprecate does not use
// pflag's MarkDeprecated: cobra v1.10.2 prints the note a deprecated flag
// gives with Command.Print, which writes to the command's output, that is
// standard output, where it would corrupt --format json. When this fails,
// cobra prints the note elsewhere: deprecate and noteDeprecated can give
// way to MarkDeprecated.
func TestCobraPrintsDeprecationsOnStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	var old string
	c := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	c.Flags().StringVar(&old, "out", "", "")
	if err := c.Flags().MarkDeprecated("out", "use -o"); err != nil {
		t.Fatal(err)
	}
	c.SetOut(&stdout)
	c.SetErr(&stderr)
	c.SetArgs([]string{"--out", "f"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "Flag --out has been deprecated") || stderr.Len() != 0 {
		t.Errorf("cobra changed: its's deprecation note is no longer on standard output alone (stdout %q, stderr %q): deprecate in flags.go can use MarkDeprecated", stdout.String(), stderr.String())
	}
}

// TestDeprecatedSpellingNotesOnStderr: an old spelling works, says so on
// standard error, and leaves standard output to the command.
func TestDeprecatedSpellingNotesOnStderr(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := run(t, "keygen", "--out", dir+"/k")
	if code != 0 {
		t.Fatalf("keygen --out: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "--out is deprecated") || strings.Contains(stdout, "deprecated") {
		t.Errorf("keygen --out: the note is not on standard error alone:\nstdout %q\nstderr %q", stdout, stderr)
	}
}
