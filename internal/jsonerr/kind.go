// Package jsonerr helps write messages about bad JSON input: where it
// stops being UTF-8, the line and column of a byte, and what kind of JSON
// value a Go type wanted.
package jsonerr

import "reflect"

// KindOf names the JSON value a value of type t decodes from: "an object", "an
// array", "a string", "true or false", "an integer", "an integer of 0 or
// more" (unsigned) or "a number"; a nil type, or one of another kind, is
// "another value".
func KindOf(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer of 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another value"
}
