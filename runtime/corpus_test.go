package runtime_test

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime"
	"github.com/policyc/policyc/runtime/table"
)

// TestCorpus runs the decision corpus in testdata/corpus: each archive holds
// a policy and requests with the decision (and deciding origin) expected,
// and optionally the approval timeouts expected. Archives run in parallel.
func TestCorpus(t *testing.T) {
	paths, err := filepath.Glob("../testdata/corpus/*.txtar")
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
			slow, err := runtime.LoadForInspection(fast.Source())
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
					if d.Effect != runtime.Approve {
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
func compileArchive(t *testing.T, ar *txtar.Archive) (*runtime.Table, map[string][]byte) {
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
	rt, err := runtime.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	<-rt.Ready()
	return rt, sections
}

type request struct {
	principal, server string
	kind              runtime.Kind
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
		kind, ok := runtime.ParseKind(fields[2])
		if !ok {
			kind = runtime.Kind(99) // an unknown kind, decided as such
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
