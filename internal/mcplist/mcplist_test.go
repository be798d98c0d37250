package mcplist

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

func TestAllLimits(t *testing.T) {
	ctx := context.Background()
	one := new(int)
	long := strings.Repeat("c", 1<<20)
	for _, tc := range []struct {
		name  string
		page  func(cursor string) ([]*int, string, int, error)
		want  string // error text; "" for success
		pages int    // at most this many pages asked for
	}{
		{"two pages", func(c string) ([]*int, string, int, error) {
			if c == "" {
				return []*int{one}, "p2", 10, nil
			}
			return []*int{one, nil}, "", 10, nil
		}, "", 2},
		{"repeated cursor", func(string) ([]*int, string, int, error) { return nil, "again", 10, nil }, `cursor "again" twice (after 2 pages)`, 2},
		{"cycle", func(c string) ([]*int, string, int, error) {
			if c == "A" {
				return nil, "B", 10, nil
			}
			return nil, "A", 10, nil
		}, `cursor "A" twice (after 3 pages)`, 3},
		{"repeated long cursor", func(string) ([]*int, string, int, error) { return nil, long, len(long), nil },
			`cursor "` + strings.Repeat("c", 60) + `"… (1048576 bytes) twice`, 2},
		{"endless cursors", func(c string) ([]*int, string, int, error) {
			n, _ := strconv.Atoi(c)
			return nil, strconv.Itoa(n + 1), 10, nil
		}, "more than 1000 pages, the most one listing may have", MaxPages},
		{"endless long cursors", func(c string) ([]*int, string, int, error) {
			n, _ := strconv.Atoi(strings.TrimRight(c, "c"))
			next := strconv.Itoa(n+1) + long
			return nil, next, len(next) + 20, nil
		}, "more than 64 MiB of JSON in 64 pages", 64},
		{"too many items", func(c string) ([]*int, string, int, error) {
			n, _ := strconv.Atoi(c)
			return make([]*int, 1000), strconv.Itoa(n + 1), 10, nil
		}, "more than 100000 items in 101 pages", 101},
		{"one page too big", func(c string) ([]*int, string, int, error) { return []*int{one}, "", MaxBytes + 1, nil }, "more than 64 MiB of JSON in 1 page,", 1},
	} {
		pages := 0
		items, err := all(ctx, func(c string) ([]*int, string, int, error) { pages++; return tc.page(c) })
		switch {
		case tc.want == "" && (err != nil || len(items) != 3):
			t.Errorf("%s: %d items, %v", tc.name, len(items), err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: an error of %d bytes", tc.name, len(err.Error()))
		}
		if pages > tc.pages {
			t.Errorf("%s: %d pages asked for, want at most %d", tc.name, pages, tc.pages)
		}
	}
}
