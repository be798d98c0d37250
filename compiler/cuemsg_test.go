package compiler

import (
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
)

// TestCUEFormats pins the CUE (v0.17.1) message formats the compiler tells
// errors apart by (cuemsg.go): each source below must give an error with
// exactly that format and those arguments. When it fails after a CUE
// upgrade, CUE has reworded a message: update the constant, and check the
// goldens (testdata/compile) still pass.
func TestCUEFormats(t *testing.T) {
	cases := []struct {
		name, src, format string
		args              []string
		// concrete validates with cue.Concrete, as evalErrors does.
		concrete bool
	}{
		{"conflict", "a: 1\na: 2", cueConflict, []string{"2", "1"}, false},
		{"conflict of kinds", "a: 1\na: \"x\"", cueConflictTypes, []string{"1", `"x"`, "int", "string"}, false},
		{"out of bound", "a: <3\na: 5", cueOutOfBound, []string{"5", "<3"}, false},
		{"not found", "a: b", cueNotFound, []string{"b"}, false},
		{"import not defined", "import \"example.com/x\"\na: x.y", cueImportNotDefined, []string{"example.com/x", ""}, false},
		{"incomplete", "a: int", cueIncomplete, []string{"int"}, true},
		{"empty disjunction", "a: 1 | 2\na: 3", cueEmptyDisjunction, []string{"2"}, false},
		{"not allowed", "#D: {a: int}\nx: #D & {b: 1}", cueNotAllowed, []string{}, false},
		{"required", "a!: int", cueRequired, []string{}, true},
		{"list lengths", "a: [1]\na: [1, 2]", cueListLengths, []string{"1", "2"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := cuecontext.New().CompileString(tc.src)
			err := v.Err()
			if err == nil {
				if tc.concrete {
					err = v.Validate(cue.Concrete(true))
				} else {
					err = v.Validate()
				}
			}
			var got []cueMessage
			for _, e := range cueerrors.Errors(err) {
				m := messageOf(e)
				got = append(got, m)
				if m.format == tc.format && equalStrings(m.args, tc.args) {
					return
				}
			}
			t.Errorf("no error with format %q and arguments %q; got %q", tc.format, tc.args, got)
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCUEConflictValuesWithAnd: the values of a conflict are CUE's own
// arguments, so a value that itself holds " and " is not split there.
func TestCUEConflictValuesWithAnd(t *testing.T) {
	err := cuecontext.New().CompileString("a: \"x and y\"\na: \"z\"").Err()
	for _, e := range cueerrors.Errors(err) {
		if vals, _, ok := messageOf(e).conflict(); ok {
			if vals != [2]string{`"z"`, `"x and y"`} && vals != [2]string{`"x and y"`, `"z"`} {
				t.Errorf("values %q", vals)
			}
			return
		}
	}
	t.Fatalf("no conflict in %v", err)
}

// A number past a numeric bound is worded as the limit and what to write;
// other bounds are left to their own wording.
func TestNumberBound(t *testing.T) {
	for _, tc := range []struct{ value, bound, msg, suggestion string }{
		{"100000", "<=86400", "p: 100000 is more than 86400, the most allowed", "write at most 86400"},
		{"-1", ">=0", "p: -1 is less than 0, the least allowed", "write at least 0"},
		{"0", ">0", "p: 0 is too small: it must be more than 0", "write a number more than 0"},
		{"2.5", "<1.5", "p: 2.5 is too large: it must be less than 1.5", "write a number less than 1.5"},
		{"5000", "<=1E+3", "p: 5000 is more than 1E+3, the most allowed", "write at most 1E+3"},
		{"-2", ">=-1", "p: -2 is less than -1, the least allowed", "write at least -1"},
	} {
		msg, s, ok := numberBound("p", tc.value, tc.bound)
		if !ok || msg != tc.msg || s != tc.suggestion {
			t.Errorf("%s %s: %q, %q, %v", tc.value, tc.bound, msg, s, ok)
		}
	}
	for _, tc := range [][2]string{{`"x"`, `=~"^a"`}, {`""`, `!=""`}, {`"a"`, `<="b"`}} {
		if msg, _, ok := numberBound("p", tc[0], tc[1]); ok {
			t.Errorf("%s %s worded as %q", tc[0], tc[1], msg)
		}
	}
}
