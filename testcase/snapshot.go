package testcase

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/runtime/table"
)

// SnapshotFile is where Snapshot's cases are written, relative to the
// policy root.
const SnapshotFile = Dir + "/snapshot.cue"

// SnapshotGroup is the group of the snapshot's cases.
const SnapshotGroup = "snapshot"

// SnapshotResult is a snapshot test file and what it holds.
type SnapshotResult struct {
	File []byte
	// Cases is the number of cases it records, for Items items.
	Cases, Items int
	// Skipped counts the catalogued items of servers the policy does not
	// define: the gateway denies them, and a case cannot name them.
	Skipped int
}

// Snapshot decides every item of cat with table t, for anyone (in no
// group, with no scope of their own), for a member of each group of the
// policy alone, and for each principal the policy names (in a group or
// with a scope of their own), and returns a test file that records each
// decision as a case: a policy change that flips any of them fails the
// tests until the snapshot is taken again. The cases do not name the rule
// that decides, so moving a rule within the files does not fail them.
func Snapshot(t *table.Table, cat *catalog.Catalog) (*SnapshotResult, error) {
	var groups []string
	principals := map[string]bool{}
	for _, sc := range t.Scopes {
		if g, ok := strings.CutPrefix(sc.Name, "group:"); ok {
			groups = append(groups, g)
		}
		if p, ok := strings.CutPrefix(sc.Name, "principal:"); ok {
			principals[p] = true
		}
		for _, m := range sc.Members {
			principals[m] = true
		}
	}
	slices.Sort(groups)
	names := slices.Sorted(maps.Keys(principals))
	res := &SnapshotResult{}
	var cases []*Case
	for it := range cat.Items() {
		kind, ok := table.ParseKind(it.Kind)
		if !ok {
			return nil, fmt.Errorf("catalogue item %s %q: unknown kind %q", it.Server, it.Name, it.Kind)
		}
		if _, ok := t.Servers[it.Server]; !ok {
			res.Skipped++
			continue
		}
		res.Items++
		// The item's name is quoted: nothing it holds can make two
		// cases' names equal.
		base := fmt.Sprintf("%s %s %q", it.Server, it.Kind, it.Name)
		cases = append(cases, &Case{Group: SnapshotGroup, Name: base, Server: it.Server, Kind: kind, Item: it.Name})
		for _, g := range groups {
			cases = append(cases, &Case{Group: SnapshotGroup, Name: base + " for group " + g, Groups: []string{g}, Server: it.Server, Kind: kind, Item: it.Name})
		}
		for _, p := range names {
			cases = append(cases, &Case{Group: SnapshotGroup, Name: base + " for " + p, Principal: p, Server: it.Server, Kind: kind, Item: it.Name})
		}
	}
	r, err := NewRunner(t, cases)
	if err != nil {
		return nil, err
	}
	rep := r.Run(cases, false)
	var b bytes.Buffer
	b.WriteString(snapshotHeader)
	fmt.Fprintf(&b, "cases: %s: {\n", SnapshotGroup)
	for _, res := range rep.Results {
		c := res.Case
		fmt.Fprintf(&b, "\t%s: {", cueString(c.Name))
		switch {
		case c.Principal != "":
			fmt.Fprintf(&b, "principal: %s, ", cueString(c.Principal))
		case c.Groups != nil:
			fmt.Fprintf(&b, "groups: [%s], ", cueString(c.Groups[0]))
		}
		fmt.Fprintf(&b, "server: %s, kind: %q, name: %s, expect: %q}\n", cueString(c.Server), c.Kind, cueString(c.Item), res.Decision.Effect)
	}
	b.WriteString("}\n")
	res.File, res.Cases = b.Bytes(), len(cases)
	return res, nil
}

const snapshotHeader = `package tests

// The decision of every catalogued item (catalog/), for anyone, for a
// member of each group alone and for each principal the policy names, as
// 'policyc test --snapshot' recorded it. A policy change that flips one
// fails 'policyc test' until the snapshot is recorded again, on purpose:
// review this file's diff with the policy's.

`

// cueString writes s as a CUE string literal (JSON's string syntax is
// CUE's, and its escapes leave no \( to interpolate).
func cueString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string always encodes
	}
	return strings.TrimSuffix(b.String(), "\n")
}
