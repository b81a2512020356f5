package gputest

import (
	"reflect"
	"testing"

	"github.com/ebitengine/purego"
)

// CheckBinding checks one purego binding: purego accepts the function variable fn points at
// (it checks the argument kinds and register use when a function is registered), and every
// argument is one purego passes as a C scalar or pointer: handles and device addresses as
// integers, host memory as unsafe.Pointer, out-parameters as Go pointers, symbol names as strings.
func CheckBinding(t *testing.T, name string, fn any) {
	t.Helper()
	ft := reflect.TypeOf(fn).Elem()
	for i := 0; i < ft.NumIn(); i++ {
		switch k := ft.In(i).Kind(); k {
		case reflect.Uintptr, reflect.Uint8, reflect.Uint32, reflect.Int32, reflect.Uint64, reflect.UnsafePointer, reflect.Pointer, reflect.String:
		default:
			t.Errorf("%s: argument %d is a Go %v", name, i, k)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: purego refuses %v: %v", name, ft, r)
		}
	}()
	purego.RegisterFunc(reflect.New(ft).Interface(), 1) // registered, never called
}
