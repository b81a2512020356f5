package cuda

import (
	"reflect"
	"testing"

	"github.com/ebitengine/purego"
)

// TestBindingsRegister: purego accepts every binding's Go signature (it checks the argument
// kinds and register use when a function is registered), and every argument is one purego
// passes as a C scalar or pointer: handles and device addresses as integers, host memory as
// unsafe.Pointer, out-parameters as Go pointers, symbol names as strings.
func TestBindingsRegister(t *testing.T) {
	d := &driver{}
	for _, s := range d.symbols() {
		ft := reflect.TypeOf(s.fn).Elem()
		for i := 0; i < ft.NumIn(); i++ {
			switch k := ft.In(i).Kind(); k {
			case reflect.Uintptr, reflect.Uint8, reflect.Uint32, reflect.Int32, reflect.Uint64, reflect.UnsafePointer, reflect.Pointer, reflect.String:
			default:
				t.Errorf("%s: argument %d is a Go %v", s.name, i, k)
			}
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: purego refuses %v: %v", s.name, ft, r)
				}
			}()
			fn := reflect.New(ft)
			purego.RegisterFunc(fn.Interface(), 1) // registered, never called
		}()
	}
}
