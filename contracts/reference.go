package contracts

import (
	"fmt"
	"math"

	"tfc/runtime/device"
)

// Act applies an activation to one value.
func Act(a device.Act, x float64) float64 {
	switch a {
	case device.ActSiLU:
		return x / (1 + math.Exp(-x))
	case device.ActGELU:
		// 0.5·x·(1 + erf(x/√2)) written with erfc so the left tail keeps its digits.
		return 0.5 * x * math.Erfc(-x/math.Sqrt2)
	case device.ActGELUTanh:
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	case device.ActQuickGELU:
		return x / (1 + math.Exp(-1.702*x))
	}
	return x
}

// Linear returns act(x·wᵀ + b) + res for x [m,k], w [n,k], b [n] or nil, res [m,n] or nil.
func Linear(x []float64, m, k int, w []float64, n int, b, res []float64, act device.Act) []float64 {
	y := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for t := 0; t < k; t++ {
				s += x[i*k+t] * w[j*k+t]
			}
			if b != nil {
				s += b[j]
			}
			s = Act(act, s)
			if res != nil {
				s += res[i*n+j]
			}
			y[i*n+j] = s
		}
	}
	return y
}

// RMSNorm returns x / sqrt(mean(x²) + eps) * w per row of x [m,d].
func RMSNorm(x []float64, m, d int, w []float64, eps float64) []float64 {
	y := make([]float64, m*d)
	for i := 0; i < m; i++ {
		row := x[i*d : (i+1)*d]
		ss := 0.0
		for _, v := range row {
			ss += v * v
		}
		r := math.Sqrt(ss/float64(d) + eps)
		for j, v := range row {
			y[i*d+j] = v / r * w[j]
		}
	}
	return y
}

// LayerNorm returns (x - mean) / sqrt(var + eps) * w + b per row of x [m,d], var biased.
func LayerNorm(x []float64, m, d int, w, b []float64, eps float64) []float64 {
	y := make([]float64, m*d)
	for i := 0; i < m; i++ {
		row := x[i*d : (i+1)*d]
		mean := 0.0
		for _, v := range row {
			mean += v
		}
		mean /= float64(d)
		vr := 0.0
		for _, v := range row {
			vr += (v - mean) * (v - mean)
		}
		vr /= float64(d)
		r := math.Sqrt(vr + eps)
		for j, v := range row {
			y[i*d+j] = (v-mean)/r*w[j] + b[j]
		}
	}
	return y
}

// RopeAngle is the rotation angle of a pair at a position: the float32 product pos·inv, as
// transformers forms it (its rotary angles are float32 even when the model runs in float64).
func RopeAngle(pos int, inv float32) float64 {
	return float64(float32(pos) * inv)
}

// Rope returns x [r, width] with its first heads·headDim columns rotated, head by head, in
// rotate-half pairs (j, j+headDim/2) by the angles of pos [r, len(sections)].
func Rope(x []float64, r, width int, pos []int, heads, headDim int, theta float32, sections []int, mode device.RopeMode) ([]float64, error) {
	inv, axis, err := device.RopeFreqs(headDim, theta, sections, mode)
	if err != nil {
		return nil, err
	}
	na := len(sections)
	half := headDim / 2
	y := append([]float64(nil), x...)
	for i := 0; i < r; i++ {
		for h := 0; h < heads; h++ {
			base := i*width + h*headDim
			for j := 0; j < half; j++ {
				ang := RopeAngle(pos[i*na+axis[j]], inv[j])
				c, s := math.Cos(ang), math.Sin(ang)
				a, b := x[base+j], x[base+j+half]
				y[base+j] = a*c - b*s
				y[base+j+half] = b*c + a*s
			}
		}
	}
	return y, nil
}

// attendFunc is one query head's attention over the given key rows: its output and, in BF16
// precision, each output's slack (nil in F32 precision).
type attendFunc func(q []float64, keys, values [][]float64, scale float64) (out, slack []float64)

// attendF32 is attend as an attendFunc.
func attendF32(q []float64, keys, values [][]float64, scale float64) ([]float64, []float64) {
	return attend(q, keys, values, scale), nil
}

// attend returns softmax(q·keys·scale)·values for one query head over the given key rows.
func attend(q []float64, keys, values [][]float64, scale float64) []float64 {
	s := make([]float64, len(keys))
	mx := math.Inf(-1)
	for j, k := range keys {
		d := 0.0
		for t := range q {
			d += q[t] * k[t]
		}
		s[j] = d * scale
		mx = math.Max(mx, s[j])
	}
	sum := 0.0
	for j := range s {
		s[j] = math.Exp(s[j] - mx)
		sum += s[j]
	}
	out := make([]float64, len(q))
	for j, v := range values {
		for t := range out {
			out[t] += s[j] / sum * v[t]
		}
	}
	return out
}

// AttentionFull is attention without a cache: q [r, heads*hd], k and v [r, kvHeads*hd], spans
// cumulative row offsets; each row attends to every row of its span.
func AttentionFull(q, k, v []float64, r, heads, kvHeads, hd int, scale float64, spans []int) ([]float64, error) {
	y, _, err := attentionFull(q, k, v, r, heads, kvHeads, hd, scale, spans, attendF32)
	return y, err
}

// attentionFull is AttentionFull with each head's attention by att, and its slacks.
func attentionFull(q, k, v []float64, r, heads, kvHeads, hd int, scale float64, spans []int, att attendFunc) (y, slack []float64, err error) {
	if err := checkSpans(spans, r); err != nil {
		return nil, nil, err
	}
	kw := kvHeads * hd
	y, slack = make([]float64, r*heads*hd), make([]float64, r*heads*hd)
	for s := 0; s+1 < len(spans); s++ {
		lo, hi := spans[s], spans[s+1]
		for i := lo; i < hi; i++ {
			for h := 0; h < heads; h++ {
				g := h / (heads / kvHeads)
				var keys, vals [][]float64
				for j := lo; j < hi; j++ {
					keys = append(keys, k[j*kw+g*hd:j*kw+(g+1)*hd])
					vals = append(vals, v[j*kw+g*hd:j*kw+(g+1)*hd])
				}
				o, e := att(q[i*heads*hd+h*hd:i*heads*hd+(h+1)*hd], keys, vals, scale)
				copy(y[i*heads*hd+h*hd:], o)
				copy(slack[i*heads*hd+h*hd:], e)
			}
		}
	}
	return y, slack, nil
}

func checkSpans(spans []int, r int) error {
	if len(spans) < 2 || spans[0] != 0 || spans[len(spans)-1] != r {
		return fmt.Errorf("attention: spans %v must start at 0 and end at the row count %d", spans, r)
	}
	for i := 1; i < len(spans); i++ {
		if spans[i] < spans[i-1] {
			return fmt.Errorf("attention: spans %v must not decrease", spans)
		}
	}
	return nil
}

// Pages is a paged KV cache layout: pageTable [seqs, maxPages] row-major.
type Pages struct {
	Table    []int
	MaxPages int
	PageSize int
	Rows     int // cache rows: pages*PageSize
}

// Row is the cache row of (seq, pos).
func (p Pages) Row(seq, pos int) (int, error) {
	if p.MaxPages <= 0 || seq < 0 || seq >= len(p.Table)/p.MaxPages {
		return 0, fmt.Errorf("attention: sequence slot %d outside the page table's %d slots", seq, len(p.Table)/max(p.MaxPages, 1))
	}
	if pos < 0 || pos/p.PageSize >= p.MaxPages {
		return 0, fmt.Errorf("attention: position %d outside the %d pages of %d rows a slot holds", pos, p.MaxPages, p.PageSize)
	}
	page := p.Table[seq*p.MaxPages+pos/p.PageSize]
	row := page*p.PageSize + pos%p.PageSize
	if page < 0 || row >= p.Rows {
		return 0, fmt.Errorf("attention: page %d of slot %d (position %d) outside the cache's %d rows", page, seq, pos, p.Rows)
	}
	return row, nil
}

// AttentionCached stores k and v rows [r, kvHeads*hd] into the caches at (rowSeq, rowPos),
// rounding them with roundK and roundV (the caches' dtypes), then lets each row attend causally to positions 0..pos of its
// sequence. It returns y and the updated caches.
func AttentionCached(q, k, v []float64, r, heads, kvHeads, hd int, scale float64, rowSeq, rowPos []int, pages Pages,
	cacheK, cacheV []float64, roundK, roundV func(float64) float64) (y, newK, newV []float64, err error) {
	y, _, newK, newV, err = attentionCached(q, k, v, r, heads, kvHeads, hd, scale, rowSeq, rowPos, pages, cacheK, cacheV, roundK, roundV, attendF32)
	return y, newK, newV, err
}

// attentionCached is AttentionCached with each head's attention by att, and its slacks.
func attentionCached(q, k, v []float64, r, heads, kvHeads, hd int, scale float64, rowSeq, rowPos []int, pages Pages,
	cacheK, cacheV []float64, roundK, roundV func(float64) float64, att attendFunc) (y, slack, newK, newV []float64, err error) {
	kw := kvHeads * hd
	newK = append([]float64(nil), cacheK...)
	newV = append([]float64(nil), cacheV...)
	for i := 0; i < r; i++ {
		row, err := pages.Row(rowSeq[i], rowPos[i])
		if err != nil {
			return nil, nil, nil, nil, err
		}
		for t := 0; t < kw; t++ {
			newK[row*kw+t] = roundK(k[i*kw+t])
			newV[row*kw+t] = roundV(v[i*kw+t])
		}
	}
	y, slack = make([]float64, r*heads*hd), make([]float64, r*heads*hd)
	for i := 0; i < r; i++ {
		for h := 0; h < heads; h++ {
			g := h / (heads / kvHeads)
			var keys, vals [][]float64
			for p := 0; p <= rowPos[i]; p++ {
				row, err := pages.Row(rowSeq[i], p)
				if err != nil {
					return nil, nil, nil, nil, err
				}
				keys = append(keys, newK[row*kw+g*hd:row*kw+(g+1)*hd])
				vals = append(vals, newV[row*kw+g*hd:row*kw+(g+1)*hd])
			}
			o, e := att(q[i*heads*hd+h*hd:i*heads*hd+(h+1)*hd], keys, vals, scale)
			copy(y[i*heads*hd+h*hd:], o)
			copy(slack[i*heads*hd+h*hd:], e)
		}
	}
	return y, slack, newK, newV, nil
}

// Add returns a + b elementwise.
func Add(a, b []float64) []float64 {
	y := make([]float64, len(a))
	for i := range a {
		y[i] = a[i] + b[i]
	}
	return y
}

// Mul returns a * b elementwise.
func Mul(a, b []float64) []float64 {
	y := make([]float64, len(a))
	for i := range a {
		y[i] = a[i] * b[i]
	}
	return y
}

// Activate returns act(x) elementwise.
func Activate(x []float64, a device.Act) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = Act(a, v)
	}
	return y
}

// GLU returns act(gate) * up elementwise.
func GLU(gate, up []float64, a device.Act) []float64 {
	y := make([]float64, len(gate))
	for i := range gate {
		y[i] = Act(a, gate[i]) * up[i]
	}
	return y
}

// Gather returns rows idx of x [?, d]: y[i] = x[idx[i]]. Embed is Gather from the table.
func Gather(x []float64, d int, idx []int) ([]float64, error) {
	n := len(x) / max(d, 1)
	y := make([]float64, len(idx)*d)
	for i, r := range idx {
		if r < 0 || r >= n {
			return nil, fmt.Errorf("index %d of row %d outside [0,%d)", r, i, n)
		}
		copy(y[i*d:(i+1)*d], x[r*d:(r+1)*d])
	}
	return y, nil
}

// Scatter returns y with rows idx replaced by the rows of src: y[idx[i]] = src[i].
func Scatter(src []float64, d int, idx []int, y []float64) ([]float64, error) {
	n := len(y) / max(d, 1)
	out := append([]float64(nil), y...)
	for i, r := range idx {
		if r < 0 || r >= n {
			return nil, fmt.Errorf("index %d of row %d outside [0,%d)", r, i, n)
		}
		copy(out[r*d:(r+1)*d], src[i*d:(i+1)*d])
	}
	return out, nil
}

// Argmax returns each row's greedy pick of x [?, v]: the first column holding the row's largest
// value; NaN never wins and a row of NaN gives 0.
func Argmax(x []float64, v int) []float64 {
	rows := len(x) / max(v, 1)
	y := make([]float64, rows)
	for r := range rows {
		best := -1
		for c, a := range x[r*v : (r+1)*v] {
			if !math.IsNaN(a) && (best < 0 || a > x[r*v+best]) {
				best = c
			}
		}
		y[r] = float64(max(best, 0))
	}
	return y
}
