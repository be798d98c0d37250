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
	for _, tc := range []struct {
		name string
		page func(cursor string) ([]*int, string, error)
		want string // error text; "" for success
	}{
		{"two pages", func(c string) ([]*int, string, error) {
			if c == "" {
				return []*int{one}, "p2", nil
			}
			return []*int{one, nil}, "", nil
		}, ""},
		{"repeated cursor", func(string) ([]*int, string, error) { return nil, "again", nil }, `cursor "again" twice`},
		{"endless cursors", func(c string) ([]*int, string, error) {
			n, _ := strconv.Atoi(c)
			return nil, strconv.Itoa(n + 1), nil
		}, "more than 1000 pages"},
		{"too many items", func(c string) ([]*int, string, error) {
			n, _ := strconv.Atoi(c)
			return make([]*int, 1000), strconv.Itoa(n + 1), nil
		}, "more than 100000 items"},
	} {
		items, err := all(ctx, tc.page)
		switch {
		case tc.want == "" && (err != nil || len(items) != 3):
			t.Errorf("%s: %d items, %v", tc.name, len(items), err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
