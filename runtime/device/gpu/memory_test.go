package gpu

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"tfc/runtime/device"
)

// TestCopyRows: a contiguous tensor (or one row) is one copy at its offset; a strided one is one
// copy a row, each at its row's address with its slice of the host bytes.
func TestCopyRows(t *testing.T) {
	b := &Buffer{DT: device.F32, N: 64, Ptr: 1000}
	type span struct {
		dev uint64
		n   int
		lo  byte
	}
	copies := func(tt device.Tensor) []span {
		host := make([]byte, tt.Rows*tt.Cols*4)
		for i := range host {
			host[i] = byte(i)
		}
		var got []span
		err := CopyRows(tt, b, host, func(dev uint64, h []byte) error {
			got = append(got, span{dev, len(h), h[0]})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := copies(device.Tensor{Buf: b, Off: 3, Rows: 2, Cols: 4}); !slices.Equal(got, []span{{1012, 32, 0}}) {
		t.Errorf("contiguous: %v", got)
	}
	if got := copies(device.Tensor{Buf: b, Off: 3, Rows: 1, Cols: 4, Stride: 10}); !slices.Equal(got, []span{{1012, 16, 0}}) {
		t.Errorf("one strided row: %v", got)
	}
	if got := copies(device.Tensor{Buf: b, Off: 2, Rows: 3, Cols: 2, Stride: 10}); !slices.Equal(got, []span{{1008, 8, 0}, {1048, 8, 8}, {1088, 8, 16}}) {
		t.Errorf("strided: %v", got)
	}
}

// TestOwned: a backend accepts its own live buffers only.
func TestOwned(t *testing.T) {
	me, other := new(int), new(int)
	mine := &Buffer{DT: device.F32, N: 4, Owner: me}
	if b, err := Owned(mine, me); err != nil || b != mine {
		t.Fatalf("own buffer: %v", err)
	}
	for _, c := range []struct {
		buf  device.Buffer
		want string
	}{
		{&Buffer{DT: device.F32, N: 4, Owner: other}, "not this backend's"},
		{&Buffer{DT: device.F32, N: 4, Owner: me, Freed: true}, "freed"},
	} {
		if _, err := Owned(c.buf, me); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
		if _, err := ViewOf("read", device.Tensor{Buf: c.buf, Rows: 1, Cols: 1}, me); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("view: got %v, want %q", err, c.want)
		}
	}
	if _, err := ViewOf("read", device.Tensor{Buf: mine, Rows: 2, Cols: 4}, me); err == nil || !strings.Contains(err.Error(), "runs past a 4-element buffer") {
		t.Errorf("view past the end: %v", err)
	}
}

// TestPrepare: a call holds each launch's function and grid, and a parameter block whose
// pointers lead to the marshalled values in order.
func TestPrepare(t *testing.T) {
	fsys := fstest.MapFS{}
	wide := copySchedule("a_copy", "X", "Y")
	wide.Launches[0].GridY = 3
	addFamily(t, fsys, "a", source("", wide))
	lib, err := NewLibrary("cuda", fsys)
	if err != nil {
		t.Fatal(err)
	}
	x := &Buffer{DT: device.F32, N: 8, Ptr: 4096}
	y := &Buffer{DT: device.F32, N: 8, Ptr: 8192}
	address := func(b device.Buffer) (uint64, error) { return b.(*Buffer).Ptr, nil }
	op := device.Copy{X: device.Tensor{Buf: x, Rows: 2, Cols: 4}, Y: device.Tensor{Buf: y, Rows: 2, Cols: 4}}
	var ld fakeLoader
	c, err := lib.Prepare(&device.KernelRef{Name: "a_copy"}, []device.Op{op}, address, &ld)
	if err != nil {
		t.Fatal(err)
	}
	grids := []Grid{{Symbol: "a_copy", X: 2, Y: 3, Threads: 256}}
	if len(c.Funcs) != 1 || c.Funcs[0] == 0 || !slices.Equal(c.Grids, grids) || len(ld.loaded) != 1 {
		t.Fatalf("call %+v, %d loads", c, len(ld.loaded))
	}
	if want := []uint64{4096, 4, 8192, 4, 2}; !slices.Equal(c.Values, want) {
		t.Errorf("parameter values %v, want %v", c.Values, want)
	}
	if _, err := lib.Prepare(&device.KernelRef{Name: "a_copy"}, nil, address, &ld); err == nil || !strings.HasPrefix(err.Error(), "cuda: kernel a_copy: ") {
		t.Errorf("no ops: %v", err)
	}
}
