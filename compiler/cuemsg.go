package compiler

import (
	"fmt"

	cueerrors "cuelang.org/go/cue/errors"
)

// The CUE error formats the compiler reads. CUE (cuelang.org/go v0.17.1)
// gives an error's path and positions as data, but tells the kind of
// problem only by the format string of its message (errors.Error.Msg):
// there is no error code to test. These are those formats, compared whole,
// with the arguments read as CUE passed them instead of parsed back out of
// the text. TestCUEFormats pins each one: when a CUE upgrade rewords one,
// it fails, and the constant here must follow (or, if CUE has grown codes,
// go).
const (
	// cueConflict is a value set to two values of one kind; args: the two
	// values.
	cueConflict = "conflicting values %s and %s"
	// cueConflictTypes is the same for values of two kinds; args: the two
	// values, then their two kinds.
	cueConflictTypes = "conflicting values %s and %s (mismatched types %s and %s)"
	// cueOutOfBound is a value outside a bound; args: the value, the bound.
	cueOutOfBound = "invalid value %v (out of bound %s)"
	// cueNotFound is a reference to an undefined name; args: the name.
	cueNotFound = "reference %q not found"
	// cueImportNotDefined and cueImportNotFound are an import CUE cannot
	// find, at the import and at each use; args: the import path first.
	cueImportNotDefined = "package %q imported but not defined in %s"
	cueImportNotFound   = "import %q not found"
	// cueIncomplete is a value that is not concrete; args: the value.
	cueIncomplete = "incomplete value %v"
	// cueEmptyDisjunction heads the errors of a disjunction's branches,
	// which follow as errors of their own; args: how many.
	cueEmptyDisjunction = "%d errors in empty disjunction:"
	// cueNotAllowed is a key a closed struct does not declare.
	cueNotAllowed = "field not allowed"
	// cueRequired is a required field (!) with no value.
	cueRequired = "field is required but not present"
	// cueListLengths is two lists of different lengths unified; args:
	// the two lengths.
	cueListLengths = "incompatible list lengths (%d and %d)"
)

// cueMessage is a CUE error's message as CUE composed it.
type cueMessage struct {
	format string
	// args are the arguments, each formatted as the message shows it.
	args []string
	// raw are the arguments as CUE gave them, for String: a format's %d
	// needs the number, not its text.
	raw []any
}

// messageOf returns the message of e.
func messageOf(e cueerrors.Error) cueMessage {
	format, args := e.Msg()
	m := cueMessage{format: format, args: make([]string, len(args)), raw: args}
	for i, a := range args {
		m.args[i] = fmt.Sprint(a)
	}
	return m
}

// String is the message as CUE prints it.
func (m cueMessage) String() string { return fmt.Sprintf(m.format, m.raw...) }

// conflict returns the two values of a conflict, and their kinds when
// they differ ("" when not), or ok false when m is no conflict.
func (m cueMessage) conflict() (values [2]string, kinds [2]string, ok bool) {
	switch m.format {
	case cueConflict:
		return [2]string{m.args[0], m.args[1]}, kinds, true
	case cueConflictTypes:
		return [2]string{m.args[0], m.args[1]}, [2]string{m.args[2], m.args[3]}, true
	}
	return values, kinds, false
}

// outOfBound returns the bound of an out-of-bound error.
func (m cueMessage) outOfBound() (bound string, ok bool) {
	if m.format == cueOutOfBound {
		return m.args[1], true
	}
	return "", false
}

// unresolved reports whether m is a reference not found.
func (m cueMessage) unresolved() bool { return m.format == cueNotFound }

// importPath returns the path of an import CUE cannot find.
func (m cueMessage) importPath() (path string, ok bool) {
	if m.format == cueImportNotDefined || m.format == cueImportNotFound {
		return m.args[0], true
	}
	return "", false
}

// is reports whether m has the format f.
func (m cueMessage) is(f string) bool { return m.format == f }

// CUEMessage is the CUE error a Diagnostic repeats, read as CUE composed
// it (its format and arguments) rather than from the message text. Its
// methods are safe on nil, which is no CUE message.
type CUEMessage struct{ m cueMessage }

// OutOfBound returns the value and the bound of a value outside a bound,
// each as the message shows it.
func (c *CUEMessage) OutOfBound() (value, bound string, ok bool) {
	if c == nil || !c.m.is(cueOutOfBound) {
		return "", "", false
	}
	return c.m.args[0], c.m.args[1], true
}

// Mismatch returns the two values of a value of the wrong kind (one of
// them the schema's, often a kind or a pattern) and their two kinds, in
// the order CUE gave them.
func (c *CUEMessage) Mismatch() (values, kinds [2]string, ok bool) {
	if c == nil {
		return values, kinds, false
	}
	values, kinds, ok = c.m.conflict()
	return values, kinds, ok && kinds[0] != ""
}

// Required reports whether the message is a required key that is not set.
func (c *CUEMessage) Required() bool { return c != nil && c.m.is(cueRequired) }
