package contracts

import (
	"fmt"
	"math"
	"math/rand"

	"tfc/runtime/device"
)

// Builder allocates and fills the operands of contract cases on a backend.
type Builder struct {
	Backend device.Backend
	Rng     *rand.Rand
	// Specials plants NaN, +Inf and -Inf into activation inputs.
	Specials bool
	// Strided places every tensor as a column slice of a wider buffer.
	Strided bool

	err  error
	bufs []device.Buffer
}

// Err is the first allocation or write error.
func (b *Builder) Err() error { return b.err }

// Free releases everything the builder allocated.
func (b *Builder) Free() {
	for _, x := range b.bufs {
		b.Backend.Free(x)
	}
	b.bufs = nil
}

func (b *Builder) tensor(dt device.DType, rows, cols int) device.Tensor {
	if b.err != nil {
		return device.Tensor{}
	}
	wide, lo := cols, 0
	if b.Strided {
		wide, lo = cols+5, 2
	}
	buf, err := b.Backend.Alloc(dt, max(rows*wide, 1))
	if err != nil {
		b.err = err
		return device.Tensor{}
	}
	b.bufs = append(b.bufs, buf)
	t := device.Tensor{Buf: buf, Rows: rows, Cols: wide}
	if b.Strided {
		t = t.ColSlice(lo, lo+cols)
	}
	return t
}

func (b *Builder) fill(t device.Tensor, v []float32) device.Tensor {
	if b.err == nil {
		b.err = b.Backend.Write(t, v, device.F32)
	}
	return t
}

// Normal returns a tensor of N(0, scale²) values.
func (b *Builder) Normal(dt device.DType, rows, cols int, scale float64) device.Tensor {
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(b.Rng.NormFloat64() * scale)
	}
	return b.fill(b.tensor(dt, rows, cols), v)
}

// Act is an activation input: N(0,1), with NaN, +Inf and -Inf planted when Specials is set.
func (b *Builder) Act(dt device.DType, rows, cols int) device.Tensor {
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(b.Rng.NormFloat64())
	}
	if b.Specials && len(v) > 0 {
		for _, s := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			v[b.Rng.Intn(len(v))] = s
		}
	}
	return b.fill(b.tensor(dt, rows, cols), v)
}

// Out is an output tensor; its contents are left to the contract run's poison.
func (b *Builder) Out(dt device.DType, rows, cols int) device.Tensor { return b.tensor(dt, rows, cols) }

// Ints is an I32 tensor holding v.
func (b *Builder) Ints(rows, cols int, v []int32) device.Tensor {
	t := b.tensor(device.I32, rows, cols)
	if b.err == nil {
		b.err = b.Backend.Write(t, v, device.I32)
	}
	return t
}

// Case is one contract case: an op over freshly built random operands.
type Case struct {
	Name  string
	Build func(b *Builder) device.Op
}

const (
	f32  = device.F32
	bf16 = device.BF16
	f16  = device.F16
)

// Cases is the contract suite: every op of the catalog at several shapes (odd sizes, one row,
// blocks larger than a GEMM tile), every weight dtype, the aliases ops.go allows, and both
// attention modes with GQA.
func Cases() []Case {
	var cs []Case
	add := func(name string, f func(b *Builder) device.Op) { cs = append(cs, Case{name, f}) }

	type lin struct {
		m, k, n int
		wt      device.DType
		bias    bool
		res     bool
		act     device.Act
	}
	for _, c := range []lin{
		{1, 64, 96, f32, false, false, device.ActNone},
		{1, 64, 96, bf16, true, false, device.ActSiLU},
		{1, 64, 300, bf16, false, true, device.ActNone},
		{1, 72, 300, f32, true, false, device.ActNone},
		{7, 40, 260, bf16, false, false, device.ActNone},
		{3, 65, 7, f32, false, true, device.ActNone},
		{4, 64, 64, bf16, true, true, device.ActGELU},
		{5, 130, 67, bf16, true, true, device.ActGELUTanh},
		{17, 300, 33, f16, true, false, device.ActQuickGELU},
		{67, 96, 70, bf16, false, true, device.ActSiLU},
		{128, 64, 192, bf16, true, false, device.ActNone},
		{2, 1536, 40, bf16, false, false, device.ActNone},
	} {
		add(fmt.Sprintf("linear/m%d_k%d_n%d_%v_bias%v_res%v_%v", c.m, c.k, c.n, c.wt, c.bias, c.res, c.act), func(b *Builder) device.Op {
			o := device.Linear{X: b.Act(f32, c.m, c.k), W: b.Normal(c.wt, c.n, c.k, 1/math.Sqrt(float64(c.k))), Y: b.Out(f32, c.m, c.n), Act: c.act}
			if c.bias {
				o.B = b.Normal(c.wt, 1, c.n, 1)
			}
			if c.res {
				o.Res = b.Normal(f32, c.m, c.n, 1)
			}
			return o
		})
	}
	add("linear/y_aliases_res", func(b *Builder) device.Op {
		r := b.Normal(f32, 6, 24, 1)
		return device.Linear{X: b.Act(f32, 6, 40), W: b.Normal(bf16, 24, 40, 0.2), Res: r, Y: r}
	})
	add("linear/y_aliases_x", func(b *Builder) device.Op {
		x := b.Act(f32, 5, 32)
		return device.Linear{X: x, W: b.Normal(f32, 32, 32, 0.2), Y: x, Act: device.ActSiLU}
	})
	add("linear/bf16_out", func(b *Builder) device.Op {
		return device.Linear{X: b.Act(f32, 3, 48), W: b.Normal(bf16, 20, 48, 0.2), Y: b.Out(bf16, 3, 20)}
	})

	for _, c := range []struct {
		m, d int
		wt   device.DType
		res  bool
	}{{1, 64, f32, false}, {7, 129, bf16, true}, {3, 1536, bf16, true}} {
		add(fmt.Sprintf("rmsnorm/m%d_d%d_%v_res%v", c.m, c.d, c.wt, c.res), func(b *Builder) device.Op {
			o := device.RMSNorm{X: b.Act(f32, c.m, c.d), W: b.Normal(c.wt, 1, c.d, 1), Y: b.Out(f32, c.m, c.d), Eps: 1e-6}
			if c.res {
				o.Res, o.Sum = b.Normal(f32, c.m, c.d, 1), b.Out(f32, c.m, c.d)
			}
			return o
		})
	}
	add("rmsnorm/sum_aliases_x_y_aliases_res", func(b *Builder) device.Op {
		x, r := b.Act(f32, 4, 33), b.Normal(f32, 4, 33, 1)
		return device.RMSNorm{X: x, Res: r, Sum: x, Y: r, W: b.Normal(bf16, 1, 33, 1), Eps: 1e-5}
	})
	add("rmsnorm/y_aliases_x", func(b *Builder) device.Op {
		x := b.Act(f32, 3, 20)
		return device.RMSNorm{X: x, Y: x, W: b.Normal(f32, 1, 20, 1), Eps: 1e-6}
	})
	for _, c := range []struct {
		m, d int
		wt   device.DType
	}{{1, 32, f32}, {9, 129, bf16}} {
		add(fmt.Sprintf("layernorm/m%d_d%d_%v", c.m, c.d, c.wt), func(b *Builder) device.Op {
			return device.LayerNorm{X: b.Act(f32, c.m, c.d), W: b.Normal(c.wt, 1, c.d, 1), B: b.Normal(c.wt, 1, c.d, 1), Y: b.Out(f32, c.m, c.d), Eps: 1e-6}
		})
	}
	add("layernorm/y_aliases_x", func(b *Builder) device.Op {
		x := b.Act(f32, 2, 48)
		return device.LayerNorm{X: x, W: b.Normal(f32, 1, 48, 1), B: b.Normal(f32, 1, 48, 1), Y: x, Eps: 1e-5}
	})

	for _, c := range []struct {
		name      string
		rows      int
		heads, hd int
		extraCols int
		theta     float32
		sections  []int
		mode      device.RopeMode
		maxPos    int
		xt        device.DType
	}{
		{"1d", 5, 3, 16, 0, 10000, []int{8}, device.RopeSections, 4096, f32},
		{"1d_one_row", 1, 2, 64, 0, 1e6, []int{32}, device.RopeSections, 100000, f32},
		{"mrope", 7, 2, 16, 8, 1e6, []int{2, 3, 3}, device.RopeSections, 300, f32},
		{"vision_2d", 6, 4, 16, 0, 10000, []int{4, 4}, device.RopePerAxis, 64, f32},
		{"vision_2d_alternating", 6, 2, 20, 0, 10000, []int{5, 5}, device.RopeAlternating, 110, f32},
		{"bf16", 3, 2, 8, 0, 10000, []int{4}, device.RopeSections, 50, bf16},
	} {
		add("rope/"+c.name, func(b *Builder) device.Op {
			pos := make([]int32, c.rows*len(c.sections))
			for i := range pos {
				pos[i] = int32(b.Rng.Intn(c.maxPos))
			}
			return device.Rope{X: b.Act(c.xt, c.rows, c.heads*c.hd+c.extraCols), Pos: b.Ints(c.rows, len(c.sections), pos),
				Heads: c.heads, HeadDim: c.hd, Theta: c.theta, Sections: c.sections, Mode: c.mode}
		})
	}

	for _, c := range []struct {
		name           string
		spans          []int32
		heads, kvh, hd int
	}{
		{"one_row", []int32{0, 1}, 2, 2, 8},
		{"two_spans_gqa", []int32{0, 3, 8}, 4, 2, 16},
		{"mqa_odd", []int32{0, 5, 5, 12}, 6, 1, 12},
	} {
		add("attention/full_"+c.name, func(b *Builder) device.Op {
			r := int(c.spans[len(c.spans)-1])
			return device.Attention{Q: b.Act(f32, r, c.heads*c.hd), K: b.Normal(f32, r, c.kvh*c.hd, 1), V: b.Normal(f32, r, c.kvh*c.hd, 1),
				Y: b.Out(f32, r, c.heads*c.hd), Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd,
				Scale: float32(1 / math.Sqrt(float64(c.hd))), Spans: b.Ints(1, len(c.spans), c.spans)}
		})
	}
	add("attention/full_qkv_column_slices", func(b *Builder) device.Op {
		qkv := b.Act(f32, 9, 3*32)
		return device.Attention{Q: qkv.ColSlice(0, 32), K: qkv.ColSlice(32, 64), V: qkv.ColSlice(64, 96), Y: b.Out(f32, 9, 32),
			Heads: 4, KVHeads: 4, HeadDim: 8, Scale: 0.35, Spans: b.Ints(1, 3, []int32{0, 4, 9})}
	})
	for _, c := range []struct {
		name               string
		heads, kvh, hd, ps int
		ct                 device.DType
		rows               [][2]int32 // (seq, pos)
	}{
		{"decode_one_row", 4, 2, 16, 4, f32, [][2]int32{{1, 9}}},
		{"prefill_and_decode", 4, 2, 16, 4, f32, [][2]int32{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {2, 13}, {1, 6}}},
		{"bf16_cache_gqa", 6, 2, 8, 3, bf16, [][2]int32{{1, 3}, {1, 4}, {0, 10}}},
		{"f16_cache_page1", 2, 1, 8, 1, f16, [][2]int32{{0, 4}, {1, 0}}},
	} {
		add("attention/cache_"+c.name, func(b *Builder) device.Op {
			const seqs, maxPages = 3, 5
			pages := seqs * maxPages
			perm := b.Rng.Perm(pages)
			table := make([]int32, seqs*maxPages)
			for i := range table {
				table[i] = int32(perm[i])
			}
			n, kw := len(c.rows), c.kvh*c.hd
			rs, rp := make([]int32, n), make([]int32, n)
			for i, r := range c.rows {
				rs[i], rp[i] = r[0], r[1]
			}
			return device.Attention{Q: b.Act(f32, n, c.heads*c.hd), K: b.Normal(f32, n, kw, 1), V: b.Normal(f32, n, kw, 1),
				Y: b.Out(f32, n, c.heads*c.hd), Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd,
				Scale: float32(1 / math.Sqrt(float64(c.hd))),
				Cache: &device.KVCache{K: b.Normal(c.ct, pages*c.ps, kw, 1), V: b.Normal(c.ct, pages*c.ps, kw, 1)},
				Rows:  &device.Rows{RowSeq: b.Ints(1, n, rs), RowPos: b.Ints(1, n, rp), PageTable: b.Ints(seqs, maxPages, table), PageSize: c.ps}}
		})
	}

	for _, sh := range [][2]int{{1, 5}, {13, 77}} {
		m, d := sh[0], sh[1]
		add(fmt.Sprintf("add/%dx%d", m, d), func(b *Builder) device.Op {
			return device.Add{A: b.Act(f32, m, d), B: b.Normal(f32, m, d, 1), Y: b.Out(f32, m, d)}
		})
		add(fmt.Sprintf("mul/%dx%d", m, d), func(b *Builder) device.Op {
			return device.Mul{A: b.Act(f32, m, d), B: b.Normal(bf16, m, d, 1), Y: b.Out(f32, m, d)}
		})
		for _, a := range []device.Act{device.ActNone, device.ActSiLU, device.ActGELU, device.ActGELUTanh, device.ActQuickGELU} {
			add(fmt.Sprintf("activate/%v_%dx%d", a, m, d), func(b *Builder) device.Op {
				return device.Activate{X: b.Act(f32, m, d), Y: b.Out(f32, m, d), Act: a}
			})
		}
		add(fmt.Sprintf("glu/silu_%dx%d", m, d), func(b *Builder) device.Op {
			return device.GLU{Gate: b.Act(f32, m, d), Up: b.Normal(f32, m, d, 1), Y: b.Out(f32, m, d), Act: device.ActSiLU}
		})
	}
	add("activate/gelu_tails", func(b *Builder) device.Op {
		return device.Activate{X: b.Normal(f32, 4, 64, 6), Y: b.Out(f32, 4, 64), Act: device.ActGELU}
	})
	add("add/y_aliases_a", func(b *Builder) device.Op {
		a := b.Act(f32, 3, 17)
		return device.Add{A: a, B: b.Normal(f32, 3, 17, 1), Y: a}
	})
	add("glu/gelu_y_aliases_up", func(b *Builder) device.Op {
		u := b.Normal(f32, 2, 30, 1)
		return device.GLU{Gate: b.Act(f32, 2, 30), Up: u, Y: u, Act: device.ActGELUTanh}
	})

	add("embed/bf16_table", func(b *Builder) device.Op {
		ids := make([]int32, 7)
		for i := range ids {
			ids[i] = int32(b.Rng.Intn(50))
		}
		return device.Embed{Ids: b.Ints(1, 7, ids), Table: b.Act(bf16, 50, 24), Y: b.Out(f32, 7, 24)}
	})
	add("gather/f32", func(b *Builder) device.Op {
		idx := []int32{3, 0, 3, 8}
		return device.Gather{X: b.Act(f32, 9, 13), Index: b.Ints(1, 4, idx), Y: b.Out(f32, 4, 13)}
	})
	add("scatter/rows", func(b *Builder) device.Op {
		p := b.Rng.Perm(10)
		idx := []int32{int32(p[0]), int32(p[1]), int32(p[2])}
		return device.Scatter{Src: b.Act(f32, 3, 11), Index: b.Ints(1, 3, idx), Y: b.Normal(f32, 10, 11, 1)}
	})
	add("argmax/rows", func(b *Builder) device.Op {
		return device.Argmax{X: b.Act(f32, 6, 517), Y: b.Out(device.I32, 1, 6)}
	})
	add("argmax/ties_nan_inf", func(b *Builder) device.Op {
		nan, inf := float32(math.NaN()), float32(math.Inf(1))
		v := make([]float32, 5*40)
		for i := range v {
			v[i] = float32(b.Rng.Intn(7)) // small integers: ties in every row
		}
		v[0], v[1], v[2] = nan, 6, 6  // a NaN first, then the first of tied largest values
		v[40+17], v[40+30] = inf, inf // the first of two +Inf
		for c := range 40 {           // a row of NaN gives 0
			v[80+c] = nan
		}
		for c := range 40 { // -Inf everywhere but a NaN: the first -Inf
			v[120+c] = float32(math.Inf(-1))
		}
		v[120] = nan
		v[160+39] = float32(math.Copysign(0, -1)) // zeros of both signs tie
		for c := range 39 {
			v[160+c] = -1
		}
		v[160+20] = 0
		return device.Argmax{X: b.fill(b.tensor(f32, 5, 40), v), Y: b.Out(device.I32, 1, 5)}
	})
	add("copy/f32_to_bf16", func(b *Builder) device.Op {
		return device.Copy{X: b.Act(f32, 5, 19), Y: b.Out(bf16, 5, 19)}
	})
	add("copy/f32_to_f16", func(b *Builder) device.Op {
		return device.Copy{X: b.Act(f32, 2, 9), Y: b.Out(f16, 2, 9)}
	})
	add("copy/i32", func(b *Builder) device.Op {
		return device.Copy{X: b.Ints(1, 4, []int32{5, -1, 7, 1 << 30}), Y: b.tensor(device.I32, 1, 4)}
	})
	return cs
}
