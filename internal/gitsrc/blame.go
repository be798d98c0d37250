package gitsrc

import (
	"errors"
	"fmt"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// LineOrigin is the commit that last changed a line: who wrote the line as
// it now reads, and when.
type LineOrigin struct {
	Commit      plumbing.Hash
	AuthorName  string
	AuthorEmail string
	// Date is the author time of the commit.
	Date time.Time
	// Subject is the first line of the commit message.
	Subject string
	// Text is the line's text.
	Text string
}

// BlameLine returns the commit that last changed line (1-based) of file
// (repository-relative, slash-separated) as of commit c.
//
// It uses go-git's blame, which follows the file through renames (a parent
// holding a similar file under another path, as when the whole policy
// moves to another directory), so a move does not take credit for the
// lines it carried.
func (r *Repo) BlameLine(c *object.Commit, file string, line int) (*LineOrigin, error) {
	res, err := git.Blame(c, file)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, fmt.Errorf("blame: %s is not in commit %s", file, short(c.Hash))
	}
	if err != nil {
		return nil, fmt.Errorf("blame %s at %s: %w", file, short(c.Hash), err)
	}
	if line < 1 || line > len(res.Lines) {
		return nil, fmt.Errorf("blame: %s has %d lines at commit %s, no line %d", file, len(res.Lines), short(c.Hash), line)
	}
	l := res.Lines[line-1]
	lc, err := r.repo.CommitObject(l.Hash)
	if err != nil {
		return nil, fmt.Errorf("blame: read commit %s: %w", l.Hash, err)
	}
	return &LineOrigin{
		Commit: lc.Hash, AuthorName: lc.Author.Name, AuthorEmail: lc.Author.Email,
		Date: lc.Author.When, Subject: subject(lc.Message), Text: l.Text,
	}, nil
}

func subject(msg string) string {
	msg = strings.TrimLeft(msg, "\n")
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}
