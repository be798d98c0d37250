package decide_test

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// TestCorpus runs the decision corpus in testdata/corpus: each archive holds
// a policy and requests with the decision (and deciding origin) expected,
// and optionally the approval timeouts expected. Archives run in parallel.
func TestCorpus(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/corpus/*.txtar")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus archives: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel()
			ar, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fast, sections := compileArchive(t, ar)
			slow, err := decide.LoadForInspection(fast.Source())
			if err != nil {
				t.Fatal(err)
			}
			reqs, ok := sections["requests"]
			if !ok {
				t.Fatal("archive has no requests section")
			}
			n := 0
			eachLine(t, reqs, func(line int, req request, want []string) {
				n++
				d := fast.Decide(req.principal, req.server, req.kind, req.name)
				if s := slow.Decide(req.principal, req.server, req.kind, req.name); s != d {
					t.Errorf("requests:%d: %s: automata decide %+v, pattern by pattern %+v", line, req, d, s)
				}
				if len(want) < 2 {
					t.Fatalf("requests:%d: want `=> DECISION ORIGIN [consent]`", line)
				}
				origin := d.Origin
				if origin == "" {
					origin = "-"
				}
				got := d.Effect.String() + " " + origin
				if d.Consent {
					got += " consent"
				}
				if exp := strings.Join(want, " "); got != exp {
					t.Errorf("requests:%d: %s: got %s, want %s (reason %s, scope %s)", line, req, got, exp, d.Reason, d.Scope)
				}
			})
			if n == 0 {
				t.Fatal("no requests")
			}
			if tos, ok := sections["timeouts"]; ok {
				eachLine(t, tos, func(line int, req request, want []string) {
					d := fast.Decide(req.principal, req.server, req.kind, req.name)
					if d.Effect != table.Approve {
						t.Errorf("timeouts:%d: %s is %s, not approve", line, req, d.Effect)
						return
					}
					if got := strconv.Itoa(d.ApprovalTimeoutSeconds); got != want[0] {
						t.Errorf("timeouts:%d: %s: timeout %s, want %s", line, req, got, want[0])
					}
				})
			}
		})
	}
}

// compileArchive compiles the .cue files of an archive and returns the
// loaded table and the other sections by name.
func compileArchive(t *testing.T, ar *txtar.Archive) (*decide.Table, map[string][]byte) {
	t.Helper()
	var files []compiler.File
	sections := map[string][]byte{}
	for _, f := range ar.Files {
		if strings.HasSuffix(f.Name, ".cue") {
			files = append(files, compiler.File{Name: f.Name, Data: f.Data})
		} else {
			sections[f.Name] = f.Data
		}
	}
	res := compiler.Compile(compiler.Input{Files: files, Source: table.Source{PolicyPath: "corpus"}})
	for _, d := range res.Diagnostics {
		t.Log(d.Format(""))
	}
	if res.Table == nil {
		t.Fatal("policy does not compile")
	}
	// Decide from decoded canonical bytes, as a gateway would.
	b, err := table.Encode(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	src, err := table.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := decide.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	<-rt.Ready()
	return rt, sections
}

type request struct {
	principal, server string
	kind              table.Kind
	name              string
}

func (r request) String() string {
	return fmt.Sprintf("(%q, %q, %s, %q)", r.principal, r.server, r.kind, r.name)
}

// eachLine parses lines of the form `PRINCIPAL SERVER KIND NAME => WANT...`
// ("-" is the anonymous principal; any field may be a Go-quoted string).
func eachLine(t *testing.T, data []byte, f func(line int, req request, want []string)) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		lhs, rhs, ok := strings.Cut(text, "=>")
		if !ok {
			t.Fatalf("line %d: no =>", line)
		}
		fields, err := splitFields(lhs)
		if err != nil || len(fields) != 4 {
			t.Fatalf("line %d: want PRINCIPAL SERVER KIND NAME, got %q (%v)", line, lhs, err)
		}
		kind, ok := table.ParseKind(fields[2])
		if !ok {
			kind = table.Kind(99) // an unknown kind, decided as such
		}
		if fields[0] == "-" {
			fields[0] = ""
		}
		f(line, request{fields[0], fields[1], kind, fields[3]}, strings.Fields(rhs))
	}
}

func splitFields(s string) ([]string, error) {
	var out []string
	s = strings.TrimSpace(s)
	for s != "" {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, err
			}
			u, _ := strconv.Unquote(q)
			out = append(out, u)
			s = strings.TrimSpace(s[len(q):])
			continue
		}
		tok, rest, _ := strings.Cut(s, " ")
		out = append(out, tok)
		s = strings.TrimSpace(rest)
	}
	return out, nil
}

// TestNarrowedKinds checks that a decision goes through the narrowing
// layers of its own kind and no other: one principal's scope narrows only
// prompts, another's only tools, a third's only resources. It also checks a
// member of two groups, whose second narrowing layer, decided apart from
// the pair of the server's own and the first, denies, holds for approval
// and sets the shortest timeout, and a narrowing allow_list whose default
// denies what the server's own default allows.
func TestNarrowedKinds(t *testing.T) {
	ar := txtar.Parse([]byte(`-- policy.cue --
package policy

approval_channels: page: approvals_page: {}

global: access: tool: approval_channel: "page"

mcp_servers: docs: access: {
	tool: {
		allow_list: ["get_*", "list_*", "drop_*"]
		approval_list: ["merge_*"]
		approval_timeout_seconds: 60
	}
	prompt: allow_list: ["*"]
	resource: allow_list: ["mem://*", "file://*"]
}

principals: ann: global: access: prompt: deny_list: ["secret_*"]
principals: bo: global: access: tool: deny_list: ["drop_*"]
principals: cy: mcp_servers: docs: access: resource: allow_list: ["mem://*"]

groups: blue: {
	members: ["dee"]
	global: access: tool: {
		approval_list: ["get_*"]
		approval_timeout_seconds: 45
	}
}
groups: red: {
	members: ["dee"]
	mcp_servers: docs: access: tool: {
		deny_list: ["drop_*"]
		approval_list: ["list_*"]
		approval_timeout_seconds: 30
	}
}

mcp_servers: open: access: tool: default: "allow"
principals: ann: mcp_servers: open: access: tool: allow_list: ["read_*"]
-- requests --
ann docs prompt secret_plan => deny policy.cue:17
ann docs prompt plan => allow policy.cue:13
ann docs tool drop_table => allow policy.cue:9
bo docs tool drop_table => deny policy.cue:18
bo docs prompt drop_table => allow policy.cue:13
bo docs resource file://x => allow policy.cue:14
cy docs resource mem://x => allow policy.cue:14
cy docs resource file://x => deny policy.cue:19
cy docs tool drop_table => allow policy.cue:9
cy docs prompt x => allow policy.cue:13
dee docs tool drop_table => deny policy.cue:31
dee docs tool get_x => approve policy.cue:24
dee docs tool list_x => approve policy.cue:32
dee docs tool merge_x => approve policy.cue:10
dee docs prompt drop_table => allow policy.cue:13
- docs tool drop_table => allow policy.cue:9
- docs tool merge_x => approve policy.cue:10
ann open tool write_x => deny policy.cue:38
ann open tool read_x => allow policy.cue:37
- open tool write_x => allow policy.cue:37
-- timeouts --
dee docs tool get_x => 30
dee docs tool list_x => 30
dee docs tool merge_x => 30
- docs tool merge_x => 60
`))
	rt, sections := compileArchive(t, ar)
	check := func(section string, f func(line int, req request, d decide.Decision, want []string)) {
		n := 0
		eachLine(t, sections[section], func(line int, req request, want []string) {
			n++
			f(line, req, rt.Decide(req.principal, req.server, req.kind, req.name), want)
		})
		if n == 0 {
			t.Fatalf("no %s", section)
		}
	}
	check("requests", func(line int, req request, d decide.Decision, want []string) {
		if got, exp := d.Effect.String()+" "+d.Origin, strings.Join(want, " "); got != exp {
			t.Errorf("requests:%d: %s: got %s, want %s (reason %s, scope %s)", line, req, got, exp, d.Reason, d.Scope)
		}
	})
	check("timeouts", func(line int, req request, d decide.Decision, want []string) {
		if got := strconv.Itoa(d.ApprovalTimeoutSeconds); d.Effect != table.Approve || got != want[0] {
			t.Errorf("timeouts:%d: %s: %s, timeout %s; want approve, %s", line, req, d.Effect, got, want[0])
		}
	})
}
