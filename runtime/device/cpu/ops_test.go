package cpu_test

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"tfc/contracts"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

func launch(be device.Backend, op device.Op) error {
	return be.Launch(&device.KernelRef{Name: "k_test", Source: "test.graph:1"}, op)
}

// TestOpErrors checks that bad operands come back as errors naming the op and the operand.
func TestOpErrors(t *testing.T) {
	be := cpu.New()
	b := &contracts.Builder{Backend: be, Rng: rand.New(rand.NewSource(1))}
	defer b.Free()
	x, w, y := b.Normal(device.F32, 2, 8, 1), b.Normal(device.BF16, 4, 8, 1), b.Out(device.F32, 2, 4)
	z := b.Out(device.F32, 2, 8)
	ids := b.Ints(1, 2, []int32{1, 50})
	table := b.Normal(device.BF16, 50, 8, 1)
	q, kv := b.Normal(device.F32, 1, 8, 1), b.Normal(device.F32, 1, 8, 1)
	cache := &device.KVCache{K: b.Normal(device.F32, 8, 8, 1), V: b.Normal(device.F32, 8, 8, 1)}
	rows := &device.Rows{RowSeq: b.Ints(1, 1, []int32{0}), RowPos: b.Ints(1, 1, []int32{9}), PageTable: b.Ints(1, 2, []int32{0, 1}), PageSize: 4}
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	other := cpu.New()
	foreign, _ := other.Alloc(device.F32, 16)
	cases := []struct {
		name string
		op   device.Op
		want []string
	}{
		{"linear K", device.Linear{X: x, W: b.Normal(device.F32, 4, 7, 1), Y: y}, []string{"linear", "W is [4,7]", "8 columns"}},
		{"linear Y", device.Linear{X: x, W: w, Y: b.Out(device.F32, 2, 5)}, []string{"linear", "Y is [2,5], want [2,4]"}},
		{"linear B", device.Linear{X: x, W: w, B: b.Out(device.F32, 1, 3), Y: y}, []string{"linear", "B is [1,3]"}},
		{"linear missing W", device.Linear{X: x, Y: y}, []string{"linear", "W is missing"}},
		{"linear ids as X", device.Linear{X: ids, W: w, Y: y}, []string{"linear", "X is I32"}},
		{"linear foreign", device.Linear{X: device.Tensor{Buf: foreign, Rows: 2, Cols: 8}, W: w, Y: y}, []string{"linear", "X is not a buffer of this cpu backend"}},
		{"linear act", device.Linear{X: x, W: w, Y: y, Act: 9}, []string{"linear", "activation"}},
		{"embed id", device.Embed{Ids: ids, Table: table, Y: b.Out(device.F32, 2, 8)}, []string{"embed", "Ids[1] = 50", "50 rows"}},
		{"gather past end", device.Gather{X: device.Tensor{Buf: x.Buf, Off: 9, Rows: 2, Cols: 8}, Index: ids, Y: b.Out(device.F32, 2, 8)}, []string{"gather", "X [2,8] at offset 9", "runs past"}},
		{"rmsnorm W", device.RMSNorm{X: x, W: b.Out(device.F32, 1, 7), Y: b.Out(device.F32, 2, 8)}, []string{"rmsnorm", "W is [1,7]"}},
		{"rope sections", device.Rope{X: x, Pos: b.Ints(2, 1, []int32{0, 1}), Heads: 2, HeadDim: 4, Sections: []int{3}}, []string{"rope", "Sections [3]"}},
		{"attention heads", device.Attention{Q: q, K: kv, V: kv, Y: b.Out(device.F32, 1, 8), Heads: 3, KVHeads: 2, HeadDim: 4}, []string{"attention", "KVHeads 2"}},
		{"attention page", device.Attention{Q: q, K: kv, V: kv, Y: b.Out(device.F32, 1, 8), Heads: 2, KVHeads: 2, HeadDim: 4, Scale: 1, Cache: cache, Rows: rows},
			[]string{"attention", "outside the 2 pages of 4 rows", "(row 0)"}},
		{"attention spans", device.Attention{Q: q, K: kv, V: kv, Y: b.Out(device.F32, 1, 8), Heads: 2, KVHeads: 2, HeadDim: 4, Scale: 1, Spans: b.Ints(1, 2, []int32{0, 2})},
			[]string{"attention", "Spans"}},
		{"rmsnorm outputs overlap", device.RMSNorm{X: x, Res: x, Sum: z, Y: z, W: b.Normal(device.F32, 1, 8, 1)}, []string{"rmsnorm", "outputs Y and Sum overlap"}},
		{"scatter index", device.Scatter{Src: x, Index: b.Ints(1, 2, []int32{0, -1}), Y: b.Out(device.F32, 4, 8)}, []string{"scatter", "Index[1] = -1"}},
		{"copy dtypes", device.Copy{X: ids, Y: b.Out(device.F32, 1, 2)}, []string{"copy", "integers and floats"}},
	}
	for _, c := range cases {
		err := launch(be, c.op)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, s := range append(c.want, "kernel k_test (test.graph:1)") {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, s)
			}
		}
	}
	if err := be.Sync(); err == nil {
		t.Error("Sync after failed launches reported nothing")
	}
	if err := be.Sync(); err != nil {
		t.Errorf("second Sync still reports %v", err)
	}
}

func readF32(t *testing.T, be device.Backend, x device.Tensor) []float32 {
	t.Helper()
	v := make([]float32, x.Rows*x.Cols)
	if err := be.Read(x, v); err != nil {
		t.Fatal(err)
	}
	return v
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// hostNormal returns n values of N(0, scale²).
func hostNormal(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

// put allocates a [rows, cols] tensor of dt on be holding v.
func put(t *testing.T, be device.Backend, dt device.DType, rows, cols int, v []float32) device.Tensor {
	t.Helper()
	x := device.Tensor{Buf: alloc(t, be, dt, rows*cols), Rows: rows, Cols: cols}
	if v != nil {
		if err := be.Write(x, v, device.F32); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// TestRowAloneEqualsBatch: a row of a linear computed alone, inside batches of every size, and
// with any number of workers has the same bits.
func TestRowAloneEqualsBatch(t *testing.T) {
	r := rng(t)
	const n, rows = 150, 140
	for _, k := range []int{64, 300, 1030} {
		xs, ws, bs := hostNormal(r, rows*k, 1), hostNormal(r, n*k, 0.1), hostNormal(r, n, 1)
		var first []float32
		for _, kern := range cpu.Kernels() {
			got := rowAloneLinear(t, kern, k, xs, ws, bs)
			if kern == "go" {
				continue
			}
			if first != nil {
				if i := sameBits(first, got); i >= 0 {
					t.Fatalf("k=%d: kernel %s gives column %d = %g, the first FMA kernel %g", k, kern, i, got[i], first[i])
				}
			}
			first = got
		}
	}
}

// rowAloneLinear checks one kernel at one K and returns row 65's bits. With six-row panels,
// row 65 alone is a one-row tail; in the batches it sits in a full panel (m ≥ 66, row 65 is the
// last of panel 10) and rows 66, 67 are one- and two-row tails (m = 67, 68) or part of a
// three-row tail (m = 69); the Go kernels see the rows in different 64-row blocks.
func rowAloneLinear(t *testing.T, kern string, k int, xs, ws, bs []float32) []float32 {
	const n, rows = 150, 140
	var want [][]float32
	for _, workers := range []int{1, 3, 8} {
		be := cpu.New(cpu.Workers(workers), cpu.Kernel(kern))
		x, w, bias := put(t, be, device.F32, rows, k, xs), put(t, be, device.BF16, n, k, ws), put(t, be, device.F32, 1, n, bs)
		if want == nil {
			for _, row := range []int{65, 66, 67} {
				alone := put(t, be, device.F32, 1, n, nil)
				if err := launch(be, device.Linear{X: x.Slice(row, row+1), W: w, B: bias, Y: alone, Act: device.ActSiLU}); err != nil {
					t.Fatal(err)
				}
				want = append(want, readF32(t, be, alone))
			}
		}
		for _, m := range []int{66, 67, 68, 69, 140} {
			y := put(t, be, device.F32, m, n, nil)
			if err := launch(be, device.Linear{X: x.Slice(0, m), W: w, B: bias, Y: y, Act: device.ActSiLU}); err != nil {
				t.Fatal(err)
			}
			for i, row := range []int{65, 66, 67} {
				if row >= m {
					continue
				}
				got := readF32(t, be, y.Slice(row, row+1))
				if j := sameBits(want[i], got); j >= 0 {
					t.Fatalf("%s k=%d m=%d: row %d column %d is %g alone, %g in the batch", be.Describe(), k, m, row, j, want[i][j], got[j])
				}
			}
		}
	}
	return want[0]
}

// TestRowWiseOpsAloneEqualsBatch: norms and cached attention give a row the same bits alone and
// inside a batch.
func TestRowWiseOpsAloneEqualsBatch(t *testing.T) {
	r := rng(t)
	be := cpu.New(cpu.Workers(4))
	const m, d, row = 37, 96, 20
	x, res := put(t, be, device.F32, m, d, hostNormal(r, m*d, 1)), put(t, be, device.F32, m, d, hostNormal(r, m*d, 1))
	w, bias := put(t, be, device.BF16, 1, d, hostNormal(r, d, 1)), put(t, be, device.F32, 1, d, hostNormal(r, d, 1))
	check := func(name string, batch, alone func(y device.Tensor) device.Op) {
		t.Helper()
		yb, ya := put(t, be, device.F32, m, d, nil), put(t, be, device.F32, 1, d, nil)
		if err := launch(be, batch(yb)); err != nil {
			t.Fatal(err)
		}
		if err := launch(be, alone(ya)); err != nil {
			t.Fatal(err)
		}
		if i := sameBits(readF32(t, be, ya), readF32(t, be, yb.Slice(row, row+1))); i >= 0 {
			t.Errorf("%s: row %d column %d differs alone and in the batch", name, row, i)
		}
	}
	sum, sum1 := put(t, be, device.F32, m, d, nil), put(t, be, device.F32, 1, d, nil)
	check("rmsnorm", func(y device.Tensor) device.Op {
		return device.RMSNorm{X: x, Res: res, Sum: sum, W: w, Y: y, Eps: 1e-6}
	}, func(y device.Tensor) device.Op {
		return device.RMSNorm{X: x.Slice(row, row+1), Res: res.Slice(row, row+1), Sum: sum1, W: w, Y: y, Eps: 1e-6}
	})
	check("layernorm", func(y device.Tensor) device.Op {
		return device.LayerNorm{X: x, W: w, B: bias, Y: y, Eps: 1e-6}
	}, func(y device.Tensor) device.Op {
		return device.LayerNorm{X: x.Slice(row, row+1), W: w, B: bias, Y: y, Eps: 1e-6}
	})

	// cached attention: 36 rows of sequence 0 (positions 0..35) and one of sequence 1
	const heads, kvh, hd, ps = 4, 2, 24, 8
	kw := kvh * hd
	seq, pos := make([]int32, m), make([]int32, m)
	for i := range seq {
		pos[i] = int32(i)
	}
	seq[m-1], pos[m-1] = 1, 3
	table := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	cache := &device.KVCache{K: put(t, be, device.BF16, 10*ps, kw, hostNormal(r, 10*ps*kw, 1)), V: put(t, be, device.BF16, 10*ps, kw, hostNormal(r, 10*ps*kw, 1))}
	ints := func(rows, cols int, v []int32) device.Tensor {
		x := device.Tensor{Buf: alloc(t, be, device.I32, rows*cols), Rows: rows, Cols: cols}
		if err := be.Write(x, v, device.I32); err != nil {
			t.Fatal(err)
		}
		return x
	}
	q := x.ColSlice(0, heads*hd)
	k, v := res.ColSlice(0, kw), res.ColSlice(kw, 2*kw)
	rowsAll := &device.Rows{RowSeq: ints(1, m, seq), RowPos: ints(1, m, pos), PageTable: ints(2, 5, table), PageSize: ps}
	rowsOne := &device.Rows{RowSeq: ints(1, 1, seq[row:row+1]), RowPos: ints(1, 1, pos[row:row+1]), PageTable: rowsAll.PageTable, PageSize: ps}
	check("attention", func(y device.Tensor) device.Op {
		return device.Attention{Q: q, K: k, V: v, Y: y, Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: 0.2, Cache: cache, Rows: rowsAll}
	}, func(y device.Tensor) device.Op {
		return device.Attention{Q: q.Slice(row, row+1), K: k.Slice(row, row+1), V: v.Slice(row, row+1), Y: y,
			Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: 0.2, Cache: cache, Rows: rowsOne}
	})
}

// TestPackedWeightsFollowWrites: a weight rewritten by Write or by an op after a launch packed
// it is seen by the next launch, with every kernel.
func TestPackedWeightsFollowWrites(t *testing.T) {
	r := rng(t)
	const m, k, n = 3, 40, 70
	for _, kern := range cpu.Kernels() {
		be := cpu.New(cpu.Kernel(kern))
		x := put(t, be, device.F32, m, k, hostNormal(r, m*k, 1))
		w := put(t, be, device.BF16, n, k, hostNormal(r, n*k, 1))
		src := put(t, be, device.F32, n, k, hostNormal(r, n*k, 1))
		y := put(t, be, device.F32, m, n, nil)
		op := device.Linear{X: x, W: w, Y: y}
		check := func(what string) {
			t.Helper()
			if _, err := contracts.Check(be, op); err != nil {
				t.Fatalf("%s, %s: %v", kern, what, err)
			}
		}
		check("first launch")
		if err := be.Write(w, hostNormal(r, n*k, 1), device.F32); err != nil {
			t.Fatal(err)
		}
		check("after Write")
		if err := launch(be, device.Copy{X: src, Y: w}); err != nil {
			t.Fatal(err)
		}
		check("after a Copy into W")
	}
}

// TestAttentionKernelsAgree: span and cached attention give the same bits on every FMA kernel
// (one chain per element, in the same order) and agree with the Go loops within rounding.
func TestAttentionKernelsAgree(t *testing.T) {
	r := rng(t)
	const m, heads, kvh, hd, ps = 41, 6, 2, 40, 8
	qs, ks, vs := hostNormal(r, m*heads*hd, 1), hostNormal(r, m*kvh*hd, 1), hostNormal(r, m*kvh*hd, 1)
	cks, cvs := hostNormal(r, 16*ps*kvh*hd, 1), hostNormal(r, 16*ps*kvh*hd, 1)
	seq, pos := make([]int32, m), make([]int32, m)
	for i := range seq {
		seq[i], pos[i] = int32(i%3), int32(20+i/3) // three sequences, rows interleaved
	}
	table := make([]int32, 3*5)
	for i := range table {
		table[i] = int32(i)
	}
	run := func(kernel string) [2][]float32 {
		be := cpu.New(cpu.Kernel(kernel), cpu.Workers(3))
		ints := func(rows, cols int, v []int32) device.Tensor {
			x := device.Tensor{Buf: alloc(t, be, device.I32, rows*cols), Rows: rows, Cols: cols}
			if err := be.Write(x, v, device.I32); err != nil {
				t.Fatal(err)
			}
			return x
		}
		q, k, v := put(t, be, device.F32, m, heads*hd, qs), put(t, be, device.F32, m, kvh*hd, ks), put(t, be, device.F32, m, kvh*hd, vs)
		var out [2][]float32
		ys := put(t, be, device.F32, m, heads*hd, nil)
		spans := ints(1, 4, []int32{0, 7, 7, m}) // an empty span too
		if err := launch(be, device.Attention{Q: q, K: k, V: v, Y: ys, Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: 0.15, Spans: spans}); err != nil {
			t.Fatal(err)
		}
		out[0] = readF32(t, be, ys)
		cache := &device.KVCache{K: put(t, be, device.BF16, 16*ps, kvh*hd, cks), V: put(t, be, device.BF16, 16*ps, kvh*hd, cvs)}
		yc := put(t, be, device.F32, m, heads*hd, nil)
		rows := &device.Rows{RowSeq: ints(1, m, seq), RowPos: ints(1, m, pos), PageTable: ints(3, 5, table), PageSize: ps}
		if err := launch(be, device.Attention{Q: q, K: k, V: v, Y: yc, Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: 0.15, Cache: cache, Rows: rows}); err != nil {
			t.Fatal(err)
		}
		out[1] = readF32(t, be, yc)
		return out
	}
	goOut := run("go")
	var first [2][]float32
	for i, k := range cpu.Kernels() {
		if k == "go" {
			continue
		}
		got := run(k)
		for p, name := range []string{"spans", "cache"} {
			if i == 0 {
				first[p] = got[p]
			} else if j := sameBits(got[p], first[p]); j >= 0 {
				t.Errorf("%s attention: %s and %s differ at %d", name, k, cpu.Kernels()[0], j)
			}
			for j := range got[p] {
				if d := math.Abs(float64(got[p][j] - goOut[p][j])); d > 1e-5 {
					t.Fatalf("%s attention: %s gives %g at %d, the Go loops %g", name, k, got[p][j], j, goOut[p][j])
				}
			}
		}
	}
}
