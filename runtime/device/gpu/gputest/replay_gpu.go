//go:build gpu

package gputest

import (
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"

	"tfc/compiler/emit/hip"
	"tfc/contracts"
	"tfc/runtime/device"
)

// Backend is a GPU backend that profiles.
type Backend interface {
	device.Backend
	device.Profiler
}

// CheckReplay runs every kernel of family f as one run of launches, three times, on a backend
// that replays graphs (the second run is captured, the third replayed) and on one that does not,
// and fails unless every stored tensor holds the same bits. It then profiles one run on graphs
// and checks that the profile names each launch, and logs what a run costs on each backend.
func CheckReplay(t *testing.T, plain, graphs Backend, f contracts.Family) {
	t.Helper()
	ks, ops, outs, free := familyChain(t, plain, f)
	defer free()
	want := runChain(t, plain, ks, ops, outs, 3)
	gks, gops, gouts, gfree := familyChain(t, graphs, f)
	defer gfree()
	got := runChain(t, graphs, gks, gops, gouts, 3)
	for i, o := range outs {
		for j := range want[i] {
			if math.Float64bits(want[i][j]) != math.Float64bits(got[i][j]) {
				t.Fatalf("%s of the run's tensor %d [%d,%d]: %v with graphs, %v without", o.Name, i, j/o.T.Cols, j%o.T.Cols, got[i][j], want[i][j])
			}
		}
	}
	t.Logf("%d kernels: %d stored tensors hold the same bits with and without graphs", len(ks), len(outs))

	var names []string // the symbol of every launch
	for _, k := range f.Kernels {
		ls, err := hip.Launches(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			names = append(names, l.Symbol)
		}
	}
	graphs.Profile(true)
	runChain(t, graphs, gks, gops, nil, 1)
	prof := graphs.Profiled()
	graphs.Profile(false)
	var profiled []string
	var total time.Duration
	for _, k := range prof {
		profiled = append(profiled, k.Name)
		total += k.Total
		if n := count(names, k.Name); k.Launches != n || k.Total < 0 {
			t.Errorf("profile of %s: %d launches in %v, want %d", k.Name, k.Launches, k.Total, n)
		}
	}
	slices.Sort(profiled)
	if launched := slices.Compact(slices.Sorted(slices.Values(names))); !slices.Equal(profiled, launched) {
		t.Errorf("the profile names %v, the run launched %v", profiled, launched)
	}
	if total <= 0 {
		t.Errorf("the profiled run took %v of kernel time", total)
	}
	t.Logf("profiled run: %d launches, %v of kernel time", len(names), total)

	const reps = 50
	for _, c := range []struct {
		name string
		be   Backend
		ks   []*device.KernelRef
		ops  [][]device.Op
	}{{"graphs off", plain, ks, ops}, {"graphs on", graphs, gks, gops}} {
		start := time.Now()
		runChain(t, c.be, c.ks, c.ops, nil, reps)
		d := time.Since(start)
		t.Logf("%s: %v a run of %d launches and a Sync (%.2f µs a launch)", c.name, d/reps, len(names), float64(d.Nanoseconds())/1e3/reps/float64(len(names)))
	}
}

// familyChain allocates, on be, the operands of every kernel of the family (the contract's op
// chains at their contract rows, from a fixed seed) and returns the launches in order and the
// tensors they store.
func familyChain(t *testing.T, be device.Backend, f contracts.Family) (ks []*device.KernelRef, ops [][]device.Op, outs []contracts.Named, free func()) {
	t.Helper()
	b := &contracts.Builder{Backend: be, Rng: rand.New(rand.NewSource(7))}
	for _, k := range f.Kernels {
		o, err := contracts.Chain(b, k, contracts.RowsFor(k))
		if err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		ks = append(ks, &device.KernelRef{Name: k.Name})
		ops = append(ops, o)
		for _, op := range o {
			_, out := contracts.Operands(op)
			outs = append(outs, out...)
		}
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return ks, ops, outs, b.Free
}

// runChain launches every kernel of the chain in order, rounds times, with a Sync after each
// round and nothing between the launches, then reads back every stored tensor.
func runChain(t *testing.T, be device.Backend, ks []*device.KernelRef, ops [][]device.Op, outs []contracts.Named, rounds int) [][]float64 {
	t.Helper()
	for r := 0; r < rounds; r++ {
		for i, k := range ks {
			if err := be.Launch(k, ops[i]...); err != nil {
				t.Fatalf("round %d, %s: %v", r+1, k.Name, err)
			}
		}
		if err := be.Sync(); err != nil {
			t.Fatalf("round %d: %v", r+1, err)
		}
	}
	read := contracts.HostRead(be)
	got := make([][]float64, len(outs))
	for i, o := range outs {
		v, err := read(o.T)
		if err != nil {
			t.Fatalf("reading %s: %v", o.Name, err)
		}
		got[i] = v
	}
	return got
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}
