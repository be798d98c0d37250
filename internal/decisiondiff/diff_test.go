package decisiondiff

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// compile compiles policy sources given as name, content pairs.
func compile(t testing.TB, files map[string]string) *table.Table {
	t.Helper()
	var in compiler.Input
	for name, data := range files {
		in.Files = append(in.Files, compiler.File{Name: name, Data: []byte(data)})
	}
	res := compiler.Compile(in)
	if res.Table == nil {
		var msgs []string
		for _, d := range res.Diagnostics {
			msgs = append(msgs, d.Format(""))
		}
		t.Fatalf("compile: %s", strings.Join(msgs, "\n"))
	}
	if _, err := table.Encode(res.Table); err != nil {
		t.Fatal(err)
	}
	return res.Table
}

func teamFiles(t testing.TB) map[string]string {
	t.Helper()
	files := map[string]string{}
	dir := "../../examples/team"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".cue") {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = string(b)
		}
	}
	return files
}

func compare(t testing.TB, old, new *table.Table, opts Options) *Report {
	t.Helper()
	r, err := Compare(old, new, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// line is the short form of a change the tests compare against.
func line(c Change) string {
	who := strings.Join(c.Principals, ",")
	if who == "" {
		who = "*"
	}
	name := c.Name
	if c.Found == FoundGlob {
		name = c.Pattern + "=" + c.Name
	}
	if c.Found == FoundOther {
		name = "(other)=" + c.Name
	}
	return fmt.Sprintf("%s %s %s %s: %s → %s", who, c.Server, c.Kind, name, c.Before.Effect, c.After.Effect)
}

func lines(r *Report) []string {
	out := []string{}
	for _, c := range r.Changes {
		out = append(out, line(c))
	}
	return out
}

func TestNoChange(t *testing.T) {
	a := compile(t, teamFiles(t))
	// Same rules, other lines: a comment moves every origin down.
	files := teamFiles(t)
	files["linear.cue"] = mustReplace(t, files["linear.cue"], "package policy\n", "package policy\n\n// Linear.\n")
	b := compile(t, files)
	r := compare(t, a, b, Options{})
	if r.Changed() || len(r.RulesAdded) != 0 || len(r.RulesRemoved) != 0 {
		t.Errorf("moved lines reported as changes: %v added %v removed %v", lines(r), r.RulesAdded, r.RulesRemoved)
	}
}

func TestTeamChanges(t *testing.T) {
	old := compile(t, teamFiles(t))
	files := teamFiles(t)
	// save_issue moves from approval to allow; delete_comment is no
	// longer denied by name (the default still denies it); github stops
	// allowing search_*; a new deny for merge_* in global.
	files["linear.cue"] = `package policy

mcp_servers: linear: access: {
	tool: {
		allow_list: ["list_*", "get_*", "search_documentation", "save_issue"]
		approval_list: ["save_comment"]
	}
	prompt: default: "allow"
}
`
	files["github.cue"] = mustReplace(t, files["github.cue"], `"search_*",`, "")
	files["policy.cue"] = mustReplace(t, files["policy.cue"], `deny_list: ["delete_*", "*_delete"]`, `deny_list: ["delete_*", "*_delete", "merge_*"]`)
	r := compare(t, old, compile(t, files), Options{})
	// delete_comment is not a change: without its deny it falls to the
	// default, deny. merge_* changes only merge_pull_request, which is a
	// row of its own.
	want := []string{
		"* github tool merge_pull_request: approve → deny",
		"* github tool search_*=search_: allow → deny",
		"* linear tool save_issue: approve → allow",
	}
	got := lines(r)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The deciding rules are named with their origins.
	for _, c := range r.Changes {
		if c.Name == "save_issue" {
			if c.Before.List != "approval_list" || c.After.List != "allow_list" || c.After.Origin != "linear.cue:5" {
				t.Errorf("save_issue: before %+v after %+v", c.Before, c.After)
			}
		}
	}
	added := fmt.Sprint(r.RulesAdded)
	removed := fmt.Sprint(r.RulesRemoved)
	for _, s := range []string{
		fmt.Sprintf("{global * tool deny_list merge_* policy.cue:%d}", lineOf(t, files["policy.cue"], `"merge_*"`)),
		"{server linear tool allow_list save_issue linear.cue:5}",
	} {
		if !strings.Contains(added, s) {
			t.Errorf("rules added %s lack %s", added, s)
		}
	}
	oldFiles := teamFiles(t)
	for _, s := range []string{
		fmt.Sprintf("{server github tool allow_list search_* github.cue:%d}", lineOf(t, oldFiles["github.cue"], `"search_*"`)),
		fmt.Sprintf("{server linear tool approval_list save_issue linear.cue:%d}", lineOf(t, oldFiles["linear.cue"], `approval_list: ["save_issue"`)),
		fmt.Sprintf("{server linear tool deny_list delete_comment linear.cue:%d}", lineOf(t, oldFiles["linear.cue"], `"delete_comment"`)),
	} {
		if !strings.Contains(removed, s) {
			t.Errorf("rules removed %s lack %s", removed, s)
		}
	}
}

func TestPrincipalClasses(t *testing.T) {
	base := `package policy

approval_channels: page: approvals_page: {}
mcp_servers: github: access: tool: {
	allow_list: ["get_*", "list_*", "delete_branch"]
	approval_channel: "page"
}
mcp_servers: linear: access: tool: allow_list: ["*"]
groups: admins: members: ["alice", "bob"]
principals: carol: mcp_servers: linear: access: tool: deny_list: ["save_*"]
`
	old := compile(t, map[string]string{"p.cue": base})
	changed := base + `groups: admins: mcp_servers: github: access: tool: deny_list: ["delete_*"]
`
	r := compare(t, old, compile(t, map[string]string{"p.cue": changed}), Options{})
	want := []string{"alice,bob github tool delete_branch: allow → deny"}
	if got := lines(r); !reflect.DeepEqual(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	// carol joins admins: her github decisions now follow the admins'.
	joined := strings.Replace(changed, `["alice", "bob"]`, `["alice", "bob", "carol"]`, 1)
	r = compare(t, compile(t, map[string]string{"p.cue": changed}), compile(t, map[string]string{"p.cue": joined}), Options{})
	want = []string{"carol github tool delete_branch: allow → deny"}
	if got := lines(r); !reflect.DeepEqual(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	if !reflect.DeepEqual(r.MembersAdded, []Member{{Group: "admins", Principal: "carol"}}) || len(r.MembersRemoved) != 0 {
		t.Errorf("members added %v removed %v", r.MembersAdded, r.MembersRemoved)
	}
}

func TestServerAddedAndDefaults(t *testing.T) {
	old := compile(t, map[string]string{"p.cue": `package policy

mcp_servers: linear: access: tool: allow_list: ["list_*"]
`})
	new := compile(t, map[string]string{"p.cue": `package policy

mcp_servers: linear: access: tool: allow_list: ["list_*"]
mcp_servers: slack: access: {
	tool: allow_list: ["post_message"]
	prompt: default: "allow"
}
`})
	r := compare(t, old, new, Options{})
	want := []string{
		"* slack tool post_message: deny → allow",
		"* slack prompt (other)=a: deny → allow",
	}
	got := lines(r)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.Changes[0].Before.Reason != "unknown server" {
		t.Errorf("before: %+v", r.Changes[0].Before)
	}
	// The other way round: removing a server denies what it allowed.
	back := lines(compare(t, new, old, Options{}))
	if len(back) != 2 || !strings.Contains(back[0], "allow → deny") {
		t.Errorf("removed server: %v", back)
	}
}

// catalogue is a fixed catalogue snapshot.
type catalogue map[string][]string

func (c catalogue) Names(server string, kind table.Kind) []string {
	return c[server+" "+kind.String()]
}

func TestCatalogueItems(t *testing.T) {
	old := compile(t, map[string]string{"p.cue": `package policy

mcp_servers: github: access: tool: allow_list: ["get_*"]
`})
	new := compile(t, map[string]string{"p.cue": `package policy

mcp_servers: github: access: tool: {
	allow_list: ["get_*"]
	deny_list: ["get_secret*"]
}
`})
	items := catalogue{"github tool": {"get_issue", "get_secret_scanning_alert", "get_secrets"}}
	r := compare(t, old, new, Options{Items: items})
	want := []string{
		"* github tool get_secret*=get_secret: allow → deny",
		"* github tool get_secret_scanning_alert: allow → deny",
		"* github tool get_secrets: allow → deny",
	}
	if got := lines(r); !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range r.Changes[1:] {
		if c.Found != FoundCatalogue {
			t.Errorf("%s found by %s, want catalogue", c.Name, c.Found)
		}
	}
}

func TestUIResources(t *testing.T) {
	src := func(allow, consent string) string {
		return `package policy

approval_channels: page: approvals_page: {}
mcp_servers: apps: {
	access: resource: allow_list: ["ui://apps/*", "file:///*"]
	ui: {
		allow_list: [` + allow + `]
		` + consent + `
	}
}
`
	}
	old := compile(t, map[string]string{"p.cue": src(`"ui://apps/board.html"`, `consent_channel: "page"`)})
	new := compile(t, map[string]string{"p.cue": src(`"ui://apps/"`, `consent_channel: "page"`)})
	r := compare(t, old, new, Options{})
	if len(r.Changes) == 0 {
		t.Fatal("widening the ui allowlist changes nothing?")
	}
	for _, c := range r.Changes {
		if c.Kind != "resource" || c.Before.Effect != "deny" || c.After.Effect != "allow" || !strings.HasPrefix(c.Name, "ui://apps/") || c.Name == "ui://apps/board.html" {
			t.Errorf("unexpected change %s", line(c))
		}
	}
	added := fmt.Sprint(r.RulesAdded)
	if !strings.Contains(added, "ui.allow_list ui://apps/") {
		t.Errorf("rules added: %s", added)
	}
}

func TestUndecided(t *testing.T) {
	// A pattern whose automaton has more states than the search may visit
	// before it reaches a long enough name: the diff says it gave up.
	hard := "*a" + strings.Repeat("?", 18)
	old := compile(t, map[string]string{"p.cue": `package policy

mcp_servers: s: access: tool: allow_list: ["` + hard + `"]
`})
	new := compile(t, map[string]string{"p.cue": `package policy

mcp_servers: s: access: tool: {
	allow_list: ["` + hard + `"]
	deny_list: ["b*"]
}
`})
	r := compare(t, old, new, Options{})
	if !r.Changed() {
		t.Fatal("report claims no change")
	}
	// The search is over the names of the added deny, b*, which the hard
	// pattern's automaton makes too large.
	if len(r.Undecided) != 1 || r.Undecided[0].Pattern != "b*" || r.Undecided[0].Server != "s" {
		t.Errorf("undecided = %v, want the region b* of server s", r.Undecided)
	}
}

// Once a comparison has spent its budget, each search left is reported
// undecided, so the report still says a change may hide there; with the
// default budget the same tables are compared in full.
func TestBudget(t *testing.T) {
	old := compile(t, map[string]string{"p.cue": `package policy

mcp_servers: s: access: tool: allow_list: ["get_*", "list_*"]
`})
	new := compile(t, map[string]string{"p.cue": `package policy

mcp_servers: s: access: tool: {
	allow_list: ["get_*", "list_*"]
	deny_list: ["get_secret*"]
}
`})
	full := compare(t, old, new, Options{})
	if len(full.Undecided) != 0 || len(full.Changes) == 0 {
		t.Fatalf("with the default budget: %d undecided, %d changes; want changes and nothing undecided", len(full.Undecided), len(full.Changes))
	}
	r := compare(t, old, new, Options{Budget: 1})
	if !r.Changed() || len(r.Undecided) == 0 {
		t.Fatalf("with a budget of 1: changed %v, undecided %v; want the searches left undecided", r.Changed(), r.Undecided)
	}
}

func TestAffixes(t *testing.T) {
	for src, want := range map[string]affix{
		"get_*":         {"get_", ""},
		"*_issue":       {"", "_issue"},
		"a?b":           {"a", "b"},
		`x\*y`:          {"x*y", "x*y"},
		"list_[a-c]*_x": {"list_", "_x"},
		"[]a]z":         {"", "z"},
		`[\]]q`:         {"", "q"},
		"[!a-]b*c":      {"", "c"},
		"é*ü":           {"é", "ü"},
	} {
		if got := affixes(src); got != want {
			t.Errorf("affixes(%q) = %+v, want %+v", src, got, want)
		}
	}
}

func TestMarkdownEscaping(t *testing.T) {
	r := &Report{
		Old: Side{Label: "main"}, New: Side{Label: "HEAD", PolicyPath: "policy"},
		Changes: []Change{{Server: "s", Kind: "tool", Name: "a|b`c", Found: FoundLiteral,
			Before: Decision{Effect: "allow", Reason: "default", Scope: "server", Origin: "p.cue:3"},
			After:  Decision{Effect: "deny", Reason: "rule", Scope: "server", List: "deny_list", Pattern: "a|b`c", Origin: "p.cue:4"}}},
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "| ``a\\|b`c`` |") || !strings.Contains(out, "`policy/p.cue:4`") {
		t.Errorf("markdown:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| * |") && strings.Count(strings.ReplaceAll(l, `\|`, ""), "|") != 8 {
			t.Errorf("row has a stray cell separator: %s", l)
		}
	}
}

func TestJSONShape(t *testing.T) {
	old := compile(t, teamFiles(t))
	files := teamFiles(t)
	files["memory.cue"] = mustReplace(t, files["memory.cue"], `"read_graph", `, "")
	r := compare(t, old, compile(t, files), Options{})
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Changes []struct {
			Principals []string
			Server     string
			Name       string
			Before     struct{ Effect, Origin string }
			After      struct{ Effect, Reason string }
		}
		RulesRemoved []struct{ Pattern, Origin string } `json:"rules_removed"`
		Undecided    []any
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Changes) != 1 || back.Changes[0].Name != "read_graph" || back.Changes[0].Principals == nil ||
		back.Changes[0].Before.Effect != "allow" || back.Changes[0].After.Reason != "default" || back.Undecided == nil {
		t.Errorf("json: %s", b.String())
	}
}

// A report with no decision change but a pinned definition change is
// changed, and its JSON keeps the fields before it in place and the
// definitions last; a report compared with nothing else has an empty
// definitions array.
func TestDefinitionsJSON(t *testing.T) {
	tb := compile(t, teamFiles(t))
	r := compare(t, tb, tb, Options{})
	if r.Changed() || r.Definitions == nil {
		t.Fatalf("same table: changed %v, definitions %v", r.Changed(), r.Definitions)
	}
	r.Definitions = []Definition{{Server: "github", Kind: "tool", Name: "get_issue", Change: "changed",
		What: "description changed", OldDigest: "sha256:a", NewDigest: "sha256:b", DescriptionDiff: "x {+y+}"}}
	if !r.Changed() {
		t.Error("a definition change alone: Changed() = false")
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := `  "undecided": [],
  "definitions": [
    {
      "server": "github",
      "kind": "tool",
      "name": "get_issue",
      "change": "changed",
      "what": "description changed",
      "old_digest": "sha256:a",
      "new_digest": "sha256:b",
      "description_diff": "x {+y+}"
    }
  ]
}
`
	if !strings.HasSuffix(out, want) {
		t.Errorf("json ends:\n%s\nwant the suffix:\n%s", out, want)
	}
	keys := []string{`"old"`, `"new"`, `"changes"`, `"rules_added"`, `"rules_removed"`, `"members_added"`, `"members_removed"`, `"undecided"`, `"definitions"`}
	at := 0
	for _, k := range keys {
		i := strings.Index(out[at:], "\n  "+k+":")
		if i < 0 {
			t.Fatalf("json: top-level %s missing or out of order:\n%s", k, out)
		}
		at += i + 1
	}
}

// The property that makes the diff exact: on random policies over a small
// alphabet, every (class, server, kind) where some enumerated name changes
// has a row, every pattern that matches a changed name has a row, and
// every row is a real change.
var (
	seed        = flag.Int64("diff.seed", 4, "seed of TestExhaustiveRandom")
	randomIters = flag.Int("diff.iters", 300, "random policy pairs TestExhaustiveRandom compares")
)

func TestExhaustiveRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(*seed))
	alpha := []string{"a", "b", ":"}
	var names []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		names = append(names, prefix)
		if n == 0 {
			return
		}
		for _, c := range alpha {
			gen(prefix+c, n-1)
		}
	}
	gen("", 4)
	names = names[1:] // no empty name
	names = append(names, "ui://a", "ui://a/b", "ui://b", "ui://ab")
	principals := []string{"", "alice", "bob", "carol", "dave"}
	iters := *randomIters
	if testing.Short() {
		iters = 50
	}
	for it := 0; it < iters; it++ {
		old := randomTable(rng)
		new := mutate(rng, old)
		ro, err := decide.Load(old)
		if err != nil {
			t.Fatal(err)
		}
		rn, err := decide.Load(new)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Compare(old, new, Options{})
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		if len(r.Undecided) > 0 {
			t.Fatalf("iteration %d: undecided %v", it, r.Undecided)
		}
		type key struct{ server, kind, name, principal string }
		reported := map[key]bool{}
		rowsFor := map[string]bool{} // server kind principal -> any row
		for _, c := range r.Changes {
			ps := c.Principals
			if len(ps) == 0 {
				ps = []string{""}
			}
			for _, p := range ps {
				reported[key{c.Server, c.Kind, c.Name, p}] = true
				rowsFor[c.Server+" "+c.Kind+" "+p] = true
			}
			k, _ := table.ParseKind(c.Kind)
			// Rows are about the rules' decisions on names as written
			// (DecideWritten): a URI's other readings are runtime's.
			for _, p := range ps {
				if ro.DecideWritten(p, c.Server, k, c.Name).Effect == rn.DecideWritten(p, c.Server, k, c.Name).Effect {
					t.Fatalf("iteration %d: row %s is no change for %q", it, line(c), p)
				}
			}
		}
		for _, server := range []string{"s1", "s2"} {
			for _, kind := range []table.Kind{table.Tool, table.Resource} {
				for _, p := range principals {
					// The anonymous class stands for principals whose own
					// scopes do not touch this block.
					who := p
					if p != "" && layerKeys(old, p, server, kind)+"|"+layerKeys(new, p, server, kind) == layerKeys(old, "", server, kind)+"|"+layerKeys(new, "", server, kind) {
						who = ""
					}
					var changed []string
					for _, n := range names {
						if ro.DecideWritten(p, server, kind, n).Effect != rn.DecideWritten(p, server, kind, n).Effect {
							changed = append(changed, n)
						}
					}
					if len(changed) > 0 && !rowsFor[server+" "+kind.String()+" "+who] {
						t.Fatalf("iteration %d: %s %s for %q: %v change, no row\nold %s\nnew %s", it, server, kind, p, changed, dump(old), dump(new))
					}
					// Every pattern matching a changed name has a row: its
					// own (literal or glob) or one for a name it matches.
					for _, pat := range patternsOf(old, new, server, kind, p) {
						g := mustGlob(t, pat)
						hit := ""
						for _, n := range changed {
							if g.Match(n) {
								hit = n
								break
							}
						}
						if hit == "" {
							continue
						}
						ok := false
						for _, c := range r.Changes {
							if c.Server == server && c.Kind == kind.String() && reflect.DeepEqual(c.Principals, classOf(who, c.Principals)) && g.Match(c.Name) {
								ok = true
							}
						}
						if !ok {
							t.Fatalf("iteration %d: %s %s %q: pattern %q matches changed %q but has no row\n%v\nold %s\nnew %s", it, server, kind, p, pat, hit, lines(r), dump(old), dump(new))
						}
					}
				}
			}
		}
	}
}

func classOf(who string, ps []string) []string {
	if who == "" {
		return []string{}
	}
	for _, p := range ps {
		if p == who {
			return ps
		}
	}
	return nil
}

// patternsOf lists the patterns of both tables that apply to principal on
// server and kind.
func patternsOf(old, new *table.Table, server string, kind table.Kind, principal string) []string {
	var out []string
	for _, tt := range []*table.Table{old, new} {
		collect := func(s table.Server) {
			if a := s.Kind(kind.String()); a != nil {
				for _, r := range a.Rules {
					out = append(out, r.Pattern)
				}
			}
		}
		if s, ok := tt.Servers[server]; ok {
			collect(s)
		}
		for i := range tt.Scopes {
			sc := &tt.Scopes[i]
			if !sc.AppliesTo(principal) {
				continue
			}
			for k, s := range sc.Servers {
				if k == server || k == table.AllServers {
					collect(s)
				}
			}
		}
	}
	return out
}

func dump(t *table.Table) string {
	b, _ := json.Marshal(t)
	return string(b)
}

var randPatterns = []string{"a", "b", "ab", "a:b", "a*", "*b", "a?", "?", "*", "[ab]*", "a*b", "*:*", "b:*", "[!a]*", "ui://a*", "ui://*", "??", "a[b:]"}

func randomAccess(rng *rand.Rand, narrowing bool, allowApprove bool) *table.Access {
	a := &table.Access{Default: table.Deny.String(), Rules: []table.Rule{}}
	if narrowing || rng.Intn(3) == 0 {
		a.Default = table.Allow.String()
	}
	if narrowing && rng.Intn(3) == 0 {
		a.Default = table.Deny.String()
	}
	n := rng.Intn(4)
	effects := []string{table.Deny.String(), table.Allow.String()}
	if allowApprove {
		effects = []string{table.Deny.String(), table.Approve.String(), table.Allow.String()}
	}
	var rules []table.Rule
	for i := 0; i < n; i++ {
		rules = append(rules, table.Rule{Effect: effects[rng.Intn(len(effects))], Pattern: randPatterns[rng.Intn(len(randPatterns))], Origin: fmt.Sprintf("p.cue:%d", i+1)})
	}
	for _, e := range effects {
		for _, r := range rules {
			if r.Effect == e {
				a.Rules = append(a.Rules, r)
			}
		}
	}
	return a
}

func randomServer(rng *rand.Rand, narrowing bool) table.Server {
	s := table.Server{}
	if !narrowing || rng.Intn(2) == 0 {
		s.Tool = randomAccess(rng, narrowing, true)
	}
	if !narrowing || rng.Intn(2) == 0 {
		s.Resource = randomAccess(rng, narrowing, false)
	}
	if !narrowing {
		s.Prompt = &table.Access{Default: table.Deny.String(), Rules: []table.Rule{}}
		if rng.Intn(2) == 0 {
			s.UI = &table.UI{AllowList: []string{[]string{"ui://a", "ui://a/", "ui://a*", "ui://b"}[rng.Intn(4)]}, Origin: "p.cue:9"}
			if rng.Intn(3) > 0 {
				s.UI.ConsentChannel = "page"
			}
		}
	}
	return s
}

func randomTable(rng *rand.Rand) *table.Table {
	t := &table.Table{
		Format:   table.Format,
		Channels: map[string]table.Channel{"page": {Kind: table.ChannelApprovalsPage, ReachesHuman: true}},
		Servers:  map[string]table.Server{"s1": randomServer(rng, false)},
	}
	if rng.Intn(2) == 0 {
		t.Servers["s2"] = randomServer(rng, false)
	}
	if rng.Intn(2) == 0 {
		t.Scopes = append(t.Scopes, table.Scope{Name: "global", Servers: map[string]table.Server{table.AllServers: randomServer(rng, true)}})
	}
	if rng.Intn(2) == 0 {
		members := [][]string{{"alice"}, {"alice", "bob"}, {"bob", "carol"}}[rng.Intn(3)]
		key := []string{table.AllServers, "s1", "s2"}[rng.Intn(3)]
		t.Scopes = append(t.Scopes, table.Scope{Name: "group:g", Members: members, Servers: map[string]table.Server{key: randomServer(rng, true)}})
	}
	if rng.Intn(2) == 0 {
		key := []string{table.AllServers, "s1"}[rng.Intn(2)]
		t.Scopes = append(t.Scopes, table.Scope{Name: "principal:carol", Servers: map[string]table.Server{key: randomServer(rng, true)}})
	}
	return t
}

// mutate returns a copy of t with a few random edits, or a fresh table.
func mutate(rng *rand.Rand, t *table.Table) *table.Table {
	if rng.Intn(4) == 0 {
		return randomTable(rng)
	}
	b, _ := json.Marshal(t)
	var c table.Table
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	for n := rng.Intn(3) + 1; n > 0; n-- {
		switch rng.Intn(7) {
		case 5, 6:
			// Edit one block's rules and keep its default: the diff
			// then searches only the edited patterns' names.
			var a *table.Access
			if len(c.Scopes) > 0 && rng.Intn(2) == 0 {
				sc := c.Scopes[rng.Intn(len(c.Scopes))]
				for _, srv := range sc.Servers {
					if srv.Tool != nil {
						a = srv.Tool
					}
				}
			}
			if a == nil {
				a = c.Servers["s1"].Tool
			}
			a.Rules = editRules(rng, a.Rules)
		case 0:
			c.Servers["s1"] = randomServer(rng, false)
		case 1:
			s := c.Servers["s1"]
			s.Tool = randomAccess(rng, false, true)
			c.Servers["s1"] = s
		case 2:
			if _, ok := c.Servers["s2"]; ok {
				delete(c.Servers, "s2")
			} else {
				c.Servers["s2"] = randomServer(rng, false)
			}
		case 3:
			if len(c.Scopes) > 0 {
				i := rng.Intn(len(c.Scopes))
				for k := range c.Scopes[i].Servers {
					c.Scopes[i].Servers[k] = randomServer(rng, true)
				}
			}
		case 4:
			s := c.Servers["s1"]
			s.Resource = randomAccess(rng, false, false)
			c.Servers["s1"] = s
		}
	}
	return &c
}

func mustGlob(t *testing.T, s string) interface{ Match(string) bool } {
	t.Helper()
	p, err := parseGlob(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// editRules adds or removes a rule, or swaps two rules of the same effect,
// keeping the deny, approve, allow order.
func editRules(rng *rand.Rand, rules []table.Rule) []table.Rule {
	out := append([]table.Rule(nil), rules...)
	switch {
	case len(out) > 0 && rng.Intn(3) == 0:
		i := rng.Intn(len(out))
		out = append(out[:i], out[i+1:]...)
	case len(out) > 1 && rng.Intn(2) == 0:
		i := rng.Intn(len(out) - 1)
		if out[i].Effect == out[i+1].Effect {
			out[i], out[i+1] = out[i+1], out[i]
		}
	default:
		effects := []string{table.Deny.String(), table.Approve.String(), table.Allow.String()}
		out = append(out, table.Rule{Effect: effects[rng.Intn(3)], Pattern: randPatterns[rng.Intn(len(randPatterns))], Origin: "p.cue:99"})
	}
	sorted := []table.Rule{}
	for _, e := range []string{table.Deny.String(), table.Approve.String(), table.Allow.String()} {
		for _, r := range out {
			if r.Effect == e {
				sorted = append(sorted, r)
			}
		}
	}
	return sorted
}

// lineOf returns the 1-based line of the first occurrence of text in src.
func lineOf(t *testing.T, src, text string) int {
	t.Helper()
	i := strings.Index(src, text)
	if i < 0 {
		t.Fatalf("%q not found in\n%s", text, src)
	}
	return strings.Count(src[:i], "\n") + 1
}

// mustReplace edits a bundled example, failing clearly if the example no
// longer reads as the test expects.
func mustReplace(t *testing.T, src, old, new string) string {
	t.Helper()
	if !strings.Contains(src, old) {
		t.Fatalf("the example no longer contains %q; update the test", old)
	}
	return strings.Replace(src, old, new, 1)
}
