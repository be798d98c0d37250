package glob

import (
	"strings"
	"testing"
)

// benchPatterns is a realistic gateway rule list: 21 globs and 14 literal
// tool names.
func benchPatterns(t testing.TB) []*Pattern {
	return parseAll(t,
		"get_*", "*_issue", "list_?ssues", "[a-c]*_x", "create_*", "*_pull_request",
		"search_*", "delete_?ranch", "repo://*/issues", "repo://owner/*", "update_*_status",
		"*:read", "admin:*", "[!a-m]*_admin", "merge_*", "get_?ile_contents", "*_secret*",
		"fork_*", "list_*_comments", "resource://*", "[xyz]?_tool",
		"list_commits", "add_issue_comment", "create_branch", "push_files", "search_users",
		"list_branches", "get_file_contents", "list_tags", "run_workflow", "cancel_workflow_run",
		"dismiss_notification", "star_repository", "list_releases", "get_commit",
	)
}

// benchNames mixes hits (of globs and of literals) and misses.
func benchNames() []string {
	return []string{
		"get_issue", "list_commits", "update_issue", "list_issues", "cancel_workflow_run",
		"repo://owner/x", "repo://other/issues", "prompt:read", "zzz_admin", "star_repository",
		"unknown_tool", "delete_repository", "x", "list_pull_requests", "dismiss_notification2",
		"resource_x", "totally_unrelated_name", "", "List_tags", "run_workflow",
	}
}

func BenchmarkSetFirst(b *testing.B) {
	s := Compile(benchPatterns(b))
	names := benchNames()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.First(names[i%len(names)])
		i++
	}
}

func BenchmarkCompile(b *testing.B) {
	pats := benchPatterns(b)
	b.ReportAllocs()
	for b.Loop() {
		Compile(pats)
	}
}

func BenchmarkCovered(b *testing.B) {
	p := MustParse("get_*")
	by := parseAll(b, "get_issue", "get_?ile_contents", "*_issue", "get_[a-m]*")
	b.ReportAllocs()
	for b.Loop() {
		Covered(p, by)
	}
}

// BenchmarkCompileLongGlob compiles the longest glob Parse accepts, whose
// DFA is a chain of MaxPatternLen states: minimizing it took Moore's
// algorithm a round per state.
func BenchmarkCompileLongGlob(b *testing.B) {
	pats := parseAll(b, strings.Repeat("a", MaxPatternLen-1)+"*", "x*y")
	b.ReportAllocs()
	for b.Loop() {
		Compile(pats)
	}
}
