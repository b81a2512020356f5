package cpu_test

import (
	"math/rand"
	"testing"

	"tfc/contracts"
	"tfc/runtime/device"
	"tfc/runtime/device/catalog"
	"tfc/runtime/device/cpu"
)

// roundCase builds one op whose every rounding point applies, and names the outputs to read.
type roundCase func(b *contracts.Builder) (device.Op, []device.Tensor)

var roundCases = map[string]roundCase{
	"linear": func(b *contracts.Builder) (device.Op, []device.Tensor) {
		y := b.Out(device.F32, 4, 24)
		return device.Linear{X: b.Normal(device.F32, 4, 64, 1), W: b.Normal(device.BF16, 24, 64, 0.2), B: b.Normal(device.F32, 1, 24, 0.5),
			Res: b.Normal(device.F32, 4, 24, 1), Y: y, Act: device.ActSiLU, Round: device.RoundProduct}, []device.Tensor{y}
	},
	"rmsnorm": func(b *contracts.Builder) (device.Op, []device.Tensor) {
		y, sum := b.Out(device.F32, 4, 48), b.Out(device.F32, 4, 48)
		return device.RMSNorm{X: b.Normal(device.F32, 4, 48, 1), Res: b.Normal(device.F32, 4, 48, 1), Sum: sum,
			W: b.Normal(device.F32, 1, 48, 1), Y: y, Eps: 1e-6}, []device.Tensor{y, sum}
	},
	"layernorm": func(b *contracts.Builder) (device.Op, []device.Tensor) {
		y := b.Out(device.F32, 4, 48)
		return device.LayerNorm{X: b.Normal(device.F32, 4, 48, 1), W: b.Normal(device.F32, 1, 48, 1), B: b.Normal(device.F32, 1, 48, 1),
			Y: y, Eps: 1e-6}, []device.Tensor{y}
	},
	"rope": func(b *contracts.Builder) (device.Op, []device.Tensor) {
		x := b.Normal(device.F32, 6, 64, 1)
		pos := make([]int32, 6*3)
		for i := range pos {
			pos[i] = int32(7*i + 3)
		}
		return device.Rope{X: x, Pos: b.Ints(6, 3, pos), Heads: 2, HeadDim: 32, Theta: 10000, Sections: []int{4, 6, 6}}, []device.Tensor{x}
	},
	"attention": func(b *contracts.Builder) (device.Op, []device.Tensor) {
		y := b.Out(device.F32, 12, 64)
		return device.Attention{Q: b.Normal(device.F32, 12, 64, 1), K: b.Normal(device.F32, 12, 32, 1), V: b.Normal(device.F32, 12, 32, 1),
			Y: y, Spans: b.Ints(1, 3, []int32{0, 5, 12}), Heads: 4, KVHeads: 2, HeadDim: 16, Scale: 0.25}, []device.Tensor{y}
	},
	"add": func(b *contracts.Builder) (device.Op, []device.Tensor) {
		y := b.Out(device.F32, 4, 40)
		return device.Add{A: b.Normal(device.F32, 4, 40, 1), B: b.Normal(device.F32, 4, 40, 0.3), Y: y}, []device.Tensor{y}
	},
	"mul": func(b *contracts.Builder) (device.Op, []device.Tensor) {
		y := b.Out(device.F32, 4, 40)
		return device.Mul{A: b.Normal(device.F32, 4, 40, 1), B: b.Normal(device.F32, 4, 40, 1), Y: y}, []device.Tensor{y}
	},
	"activate": func(b *contracts.Builder) (device.Op, []device.Tensor) {
		y := b.Out(device.F32, 4, 40)
		return device.Activate{X: b.Normal(device.F32, 4, 40, 2), Y: y, Act: device.ActQuickGELU}, []device.Tensor{y}
	},
	"glu": func(b *contracts.Builder) (device.Op, []device.Tensor) {
		y := b.Out(device.F32, 4, 40)
		return device.GLU{Gate: b.Normal(device.F32, 4, 40, 2), Up: b.Normal(device.F32, 4, 40, 1), Y: y, Act: device.ActSiLU}, []device.Tensor{y}
	},
}

// runRound runs op's case on a fresh CPU backend with opts and reads its outputs.
func runRound(t *testing.T, name string, opts ...cpu.Option) []float32 {
	t.Helper()
	be := cpu.New(opts...)
	b := &contracts.Builder{Backend: be, Rng: rand.New(rand.NewSource(3))}
	defer b.Free()
	op, outs := roundCases[name](b)
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	if err := launch(be, op); err != nil {
		t.Fatal(err)
	}
	var got []float32
	for _, o := range outs {
		v := make([]float32, o.Rows*o.Cols)
		if err := be.Read(o, v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v...)
	}
	return got
}

// TestRoundingPoints checks each op's rounding points as the catalog lists them: in BF16
// precision every output is BF16-exact and differs from F32 precision's, and leaving out any
// one point (a planted control) changes the bits, so every point the catalog names rounds.
func TestRoundingPoints(t *testing.T) {
	for _, o := range catalog.Ops {
		if len(o.Round) == 0 {
			continue
		}
		if roundCases[o.Name] == nil {
			t.Errorf("%s has rounding points but no case here", o.Name)
			continue
		}
		for _, k := range cpu.Kernels() {
			t.Run(o.Name+"/"+k, func(t *testing.T) { checkRounding(t, o.Name, cpu.Kernel(k)) })
		}
	}
}

// checkRounding is TestRoundingPoints for op name on a CPU backend made with kern.
func checkRounding(t *testing.T, name string, kern cpu.Option) {
	bf16 := cpu.Precision(device.BF16Precision)
	bf := runRound(t, name, kern, bf16)
	for i, v := range bf {
		if device.RoundBF16(v) != v && v == v {
			t.Fatalf("output %d = %g is not BF16-exact", i, v)
		}
	}
	if sameBits(bf, runRound(t, name, kern)) < 0 {
		t.Errorf("BF16 precision gives F32 precision's bits")
	}
	for _, p := range catalog.Rounds(name) {
		if sameBits(bf, runRound(t, name, kern, bf16, cpu.SkipRound(name+"."+p))) < 0 {
			t.Errorf("leaving out rounding point %s.%s changes nothing", name, p)
		}
	}
}

// TestBF16WriteRounds checks that a BF16-precision backend rounds F32 values as they are written.
func TestBF16WriteRounds(t *testing.T) {
	be := cpu.New(cpu.Precision(device.BF16Precision))
	buf, err := be.Alloc(device.F32, 2)
	if err != nil {
		t.Fatal(err)
	}
	x := device.Tensor{Buf: buf, Rows: 1, Cols: 2}
	if err := be.Write(x, []float32{1 + 1.0/256 + 1.0/1024, -3.14159}, device.F32); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 2)
	if err := be.Read(x, got); err != nil {
		t.Fatal(err)
	}
	if got[0] != 1+1.0/128 || got[1] != device.RoundBF16(-3.14159) {
		t.Fatalf("written %v, want BF16-rounded values", got)
	}
}
