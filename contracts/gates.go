package contracts

import (
	"fmt"
	"io"
	"math"
	"math/rand"
	"strings"
	"time"

	"tfc/compiler/emit/hip"
	"tfc/runtime/device"
	"tfc/runtime/device/catalog"
)

// The gates every kernel of a family must pass on a backend, at the shapes it was specialised
// for, on fresh random inputs:
//
//	1  every stored element within the kernel's bound of the float64 reference
//	2  every output element written (outputs are poisoned with NaN first)
//	3  five more launches give the same bits, and so do the kernel's rows launched alone at
//	   another batch position (a whole sequence for attention)
//	4  inputs holding NaN, +Inf and -Inf give the reference's NaN/±Inf classes
//
// A kernel's bound is four times the sum of its ops' class bounds (see the package comment):
// exact kernels (embed, gather, scatter) must match bit for bit; F32 kernels, and kernels with
// BF16 or F16 weights widened exactly and accumulated in F32, within that relative row error.
const Reruns = 5

// KernelResult is one kernel's contract run.
type KernelResult struct {
	Kernel    string
	Rows      int
	Class     string
	Bound     float64
	Worst     float64       // largest relative row error of gate 1
	PerLaunch time.Duration // wall time of a launch and a sync, mean of the reruns
	Gate      int           // the first gate that failed; 0 when all passed
	Err       error
}

// KernelClass names the precision class of a kernel's chain.
func KernelClass(k hip.Kernel) string {
	exact, narrow := true, false
	for _, o := range k.Ops {
		if c := catalog.Find(o.Kind); c == nil || c.Class != catalog.Exact {
			exact = false
		}
		for _, dt := range o.DTypes {
			narrow = narrow || dt == "BF16" || dt == "F16"
		}
	}
	switch {
	case exact:
		return "exact"
	case narrow:
		return "BF16 operands, F32 accumulation"
	}
	return "F32"
}

func launchSync(be device.Backend, k hip.Kernel, ops []device.Op) error {
	if err := be.Launch(&device.KernelRef{Name: k.Name}, ops...); err != nil {
		return err
	}
	return be.Sync()
}

func readStored(be device.Backend, stored []Stored) ([][]float64, error) {
	read := HostRead(be)
	out := make([][]float64, len(stored))
	for i, s := range stored {
		v, err := read(s.T)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.Name, err)
		}
		out[i] = v
	}
	return out, nil
}

// sameBits names the first element of got that differs in bits from want.
func sameBits(stored []Stored, want, got [][]float64) error {
	for i, s := range stored {
		for j := range want[i] {
			if math.Float64bits(want[i][j]) != math.Float64bits(got[i][j]) {
				return fmt.Errorf("%s[%d,%d] = %.9g, first launch %.9g", s.Name, j/s.T.Cols, j%s.T.Cols, got[i][j], want[i][j])
			}
		}
	}
	return nil
}

// CheckKernel runs gates 1 to 4 for kernel k on be with inputs drawn from seed.
func CheckKernel(be device.Backend, k hip.Kernel, seed int64) KernelResult {
	m := RowsFor(k)
	res := KernelResult{Kernel: k.Name, Rows: m, Class: KernelClass(k)}
	fail := func(gate int, err error) KernelResult {
		res.Gate, res.Err = gate, err
		return res
	}
	b := &Builder{Backend: be, Rng: rand.New(rand.NewSource(seed))}
	defer b.Free()
	ops, err := Chain(b, k, m)
	if err != nil {
		return fail(1, err)
	}
	stored, err := ExpectChain(be, k, ops)
	if err != nil {
		return fail(1, err)
	}
	if len(stored) > 0 {
		res.Bound = stored[0].Bound
	}
	kept, err := keepInPlace(be, ops)
	if err != nil {
		return fail(1, err)
	}
	if err := launchSync(be, k, ops); err != nil {
		return fail(1, err)
	}
	first, err := readStored(be, stored)
	if err != nil {
		return fail(1, err)
	}
	for i, s := range stored {
		worst, gate, err := s.Verify(first[i])
		res.Worst = math.Max(res.Worst, worst)
		if err != nil {
			return fail(min(gate, 2), err)
		}
	}

	var spent time.Duration
	for run := 2; run <= Reruns+1; run++ {
		if err := kept.restore(be, ops, false); err != nil {
			return fail(3, err)
		}
		start := time.Now()
		if err := launchSync(be, k, ops); err != nil {
			return fail(3, err)
		}
		spent += time.Since(start)
		again, err := readStored(be, stored)
		if err != nil {
			return fail(3, err)
		}
		if err := sameBits(stored, first, again); err != nil {
			return fail(3, fmt.Errorf("launch %d differs from the first: %w", run, err))
		}
	}
	res.PerLaunch = spent / Reruns

	for _, r := range SubRanges(k, m) {
		lo, hi := r[0], r[1]
		sub, err := SubLaunch(b, ops, lo, hi)
		if err != nil {
			return fail(3, err)
		}
		if err := kept.restore(be, sub, true); err != nil {
			return fail(3, err)
		}
		for _, op := range sub {
			if err := Poison(be, op); err != nil {
				return fail(3, err)
			}
		}
		if err := launchSync(be, k, sub); err != nil {
			return fail(3, fmt.Errorf("rows [%d,%d) alone: %w", lo, hi, err))
		}
		alone, err := readStored(be, stored)
		if err != nil {
			return fail(3, err)
		}
		if err := sameBits(stored, first, alone); err != nil {
			return fail(3, fmt.Errorf("rows [%d,%d) launched alone differ from the same rows at offset %d of a launch of %d: %w", lo, hi, lo, m, err))
		}
	}

	sb := &Builder{Backend: be, Rng: rand.New(rand.NewSource(seed ^ 0x5eed)), Specials: true}
	defer sb.Free()
	sops, err := Chain(sb, k, m)
	if err != nil {
		return fail(4, err)
	}
	sstored, err := ExpectChain(be, k, sops)
	if err != nil {
		return fail(4, err)
	}
	if err := launchSync(be, k, sops); err != nil {
		return fail(4, err)
	}
	got, err := readStored(be, sstored)
	if err != nil {
		return fail(4, err)
	}
	for i, s := range sstored {
		if _, _, err := s.Verify(got[i]); err != nil {
			return fail(4, fmt.Errorf("with NaN and ±Inf inputs: %w", err))
		}
	}
	return res
}

// Control is a planted control: a mutation of one kernel that the gates must catch.
type Control struct {
	Kernel   string
	Mutation string
}

// ControlResult is one control's run: Red when some gate failed, as planted.
type ControlResult struct {
	Control
	Red  bool
	Gate int
	Err  error // the failure that made it red, or why it could not run
}

// PlantedControls picks, for each mutation, the first kernel of each producer kind (the
// family compiler/emit/hip renders it with) where the mutation applies and can be observed.
func PlantedControls(f Family, muts []hip.Mutation) []Control {
	var cs []Control
	for _, m := range muts {
		seen := map[string]bool{}
		for _, k := range f.Kernels {
			kind := producer(k)
			if seen[kind] || (m == hip.MissingBarrier && !barrierObservable(k)) {
				continue
			}
			if _, err := hip.Render(f.Name, f.Kernels, hip.Mutate(k.Name, m)); err != nil {
				continue
			}
			seen[kind] = true
			cs = append(cs, Control{k.Name, m.String()})
		}
	}
	return cs
}

// barrierObservable reports whether a missing fill barrier can change kernel k's results. A
// norm's only cross-thread LDS fill is its block sum over 256 threads, whose first step reads
// the slots of threads 128 and up: with D ≤ 128 those hold zeros whether or not the barrier is
// there, so the mutant computes the same values and is no control.
func barrierObservable(k hip.Kernel) bool {
	for _, o := range k.Ops {
		if o.Kind == "rmsnorm" || o.Kind == "layernorm" {
			return o.Ints["D"] > 128
		}
	}
	return true
}

// producer names the op a kernel is built around: its norm, else its first op.
func producer(k hip.Kernel) string {
	for _, o := range k.Ops {
		if o.Kind == "rmsnorm" || o.Kind == "layernorm" {
			return o.Kind
		}
	}
	p := k.Ops[0].Kind
	if p == "attention" && k.Ops[0].Flags["cache"] {
		p += "/cache"
	}
	return p
}

// Target is a backend under contract and the controls it plants.
type Target struct {
	Name     string // as the SUMMARY line names it: cpu, or the GPU's architecture
	Backend  device.Backend
	Controls []Control
	// Plant returns a backend running c's mutant of its kernel, and how to release it.
	Plant func(c Control) (device.Backend, func(), error)
}

// Report is a contract run over one family on one target.
type Report struct {
	Target   string
	Family   string
	Seed     int64
	Kernels  []KernelResult
	Controls []ControlResult
}

// Passed counts kernels that passed every gate.
func (r *Report) Passed() int {
	n := 0
	for _, k := range r.Kernels {
		if k.Gate == 0 {
			n++
		}
	}
	return n
}

// Red counts controls that went red.
func (r *Report) Red() int {
	n := 0
	for _, c := range r.Controls {
		if c.Red {
			n++
		}
	}
	return n
}

// OK reports whether every kernel passed and every control went red.
func (r *Report) OK() bool {
	return r.Passed() == len(r.Kernels) && r.Red() == len(r.Controls) && len(r.Kernels) > 0
}

// Summary is the run's last line.
func (r *Report) Summary() string {
	return fmt.Sprintf("SUMMARY %s %d kernels: %d pass gates 1-4, %d fail; %d controls: %d red as planted",
		r.Target, len(r.Kernels), r.Passed(), len(r.Kernels)-r.Passed(), len(r.Controls), r.Red())
}

// Run checks every kernel of f on t and then every planted control, writing a line for each to
// w; the caller prints the Summary.
func Run(t Target, f Family, seed int64, w io.Writer) *Report {
	r := &Report{Target: t.Name, Family: f.Name, Seed: seed}
	byName := map[string]hip.Kernel{}
	for i, k := range f.Kernels {
		byName[k.Name] = k
		res := CheckKernel(t.Backend, k, seed+int64(i))
		r.Kernels = append(r.Kernels, res)
		if res.Gate == 0 {
			fmt.Fprintf(w, "PASS %-44s M=%-3d %-32s bound %.3g worst %.3g, %.1f µs a launch\n",
				k.Name, res.Rows, res.Class, res.Bound, res.Worst, float64(res.PerLaunch.Nanoseconds())/1e3)
		} else {
			fmt.Fprintf(w, "FAIL %s gate %d: %v\n", k.Name, res.Gate, res.Err)
		}
	}
	for i, c := range t.Controls {
		cr := ControlResult{Control: c}
		k, ok := byName[c.Kernel]
		switch {
		case !ok:
			cr.Err = fmt.Errorf("family %s has no kernel %s", f.Name, c.Kernel)
		case t.Plant == nil:
			cr.Err = fmt.Errorf("target %s cannot plant controls", t.Name)
		default:
			be, release, err := t.Plant(c)
			if err != nil {
				cr.Err = fmt.Errorf("planting: %w", err)
				break
			}
			res := CheckKernel(be, k, seed+1000+int64(i))
			release()
			cr.Red, cr.Gate, cr.Err = res.Gate != 0, res.Gate, res.Err
		}
		if cr.Red {
			fmt.Fprintf(w, "RED  %s in %s: gate %d: %v\n", c.Mutation, c.Kernel, cr.Gate, firstLine(cr.Err))
		} else if cr.Err != nil {
			fmt.Fprintf(w, "MISS %s in %s did not run: %v\n", c.Mutation, c.Kernel, cr.Err)
		} else {
			fmt.Fprintf(w, "MISS %s in %s: every gate passed the mutant\n", c.Mutation, c.Kernel)
		}
		r.Controls = append(r.Controls, cr)
	}
	return r
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// inPlace holds the first launch's values of every F32 tensor an op of the chain reads and
// writes (rope's X, scatter's Y, the KV cache), by op and field, so a relaunch starts from them.
type inPlace map[[2]string]keptTensor

type keptTensor struct {
	t    device.Tensor
	data []float32
}

func keepInPlace(be device.Backend, ops []device.Op) (inPlace, error) {
	kept := inPlace{}
	for i, op := range ops {
		ns, err := device.Operands(op)
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			if !n.In || !n.Out || n.T.Buf == nil || n.T.Buf.DType() != device.F32 {
				continue
			}
			data := make([]float32, n.T.Rows*n.T.Cols)
			if err := be.Read(n.T, data); err != nil {
				return nil, fmt.Errorf("keeping %s: %w", n.Field, err)
			}
			kept[[2]string{fmt.Sprint(i), n.Field}] = keptTensor{n.T, data}
		}
	}
	return kept, nil
}

// restore writes the kept values back under ops: the whole tensor where ops view it whole (a
// relaunch); in a sub-launch, the rows of the sub-range where the op's rows operand is the one
// it writes in place (rope's X), so rows outside keep their results and a cache or a scattered
// Y, which the sub-launch rewrites as the first launch did, is left alone.
func (kept inPlace) restore(be device.Backend, ops []device.Op, sub bool) error {
	for i, op := range ops {
		ns, err := device.Operands(op)
		if err != nil {
			return err
		}
		rows := ""
		if spec, err := device.Spec(op); err == nil {
			rows = spec.Rows
		}
		for _, n := range ns {
			k, ok := kept[[2]string{fmt.Sprint(i), n.Field}]
			if !ok || (sub && n.Field != rows) {
				continue
			}
			if !sub {
				if err := be.Write(k.t, k.data, device.F32); err != nil {
					return err
				}
				continue
			}
			stride := k.t.RowStride()
			if n.T.Buf != k.t.Buf || n.T.Cols != k.t.Cols || n.T.RowStride() != stride || (n.T.Off-k.t.Off)%stride != 0 {
				continue // not a row range of the kept tensor (a cache the sub-launch shares whole)
			}
			r0 := (n.T.Off - k.t.Off) / stride
			if r0 < 0 || r0+n.T.Rows > k.t.Rows {
				continue
			}
			if err := be.Write(n.T, k.data[r0*k.t.Cols:(r0+n.T.Rows)*k.t.Cols], device.F32); err != nil {
				return err
			}
		}
	}
	return nil
}
