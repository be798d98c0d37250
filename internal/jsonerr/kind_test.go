package jsonerr

import (
	"reflect"
	"testing"
)

func TestKindOf(t *testing.T) {
	var n *int
	cases := []struct {
		t    reflect.Type
		want string
	}{
		{reflect.TypeOf(struct{}{}), "an object"},
		{reflect.TypeOf(map[string]int{}), "an object"},
		{reflect.TypeOf([]string{}), "an array"},
		{reflect.TypeOf([2]int{}), "an array"},
		{reflect.TypeOf(""), "a string"},
		{reflect.TypeOf(true), "true or false"},
		{reflect.TypeOf(uint64(0)), "an integer of 0 or more"},
		{reflect.TypeOf(int64(0)), "an integer"},
		{reflect.TypeOf(n), "an integer"},
		{reflect.TypeOf(1.5), "a number"},
		{reflect.TypeOf(make(chan int)), "another value"},
		{nil, "another value"},
	}
	for _, c := range cases {
		if got := KindOf(c.t); got != c.want {
			t.Errorf("KindOf(%v) = %q, want %q", c.t, got, c.want)
		}
	}
}
