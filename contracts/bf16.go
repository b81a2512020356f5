package contracts

import (
	"math"

	"tfc/runtime/device"
)

// The float64 reference of BF16 precision rounds where the backends do, at each op's rounding
// points (package catalog's Round), and gives each output element a slack: where the float64
// value and a backend's F32 value lie either side of a rounding boundary, the point rounds the
// other way, one BF16 ulp of the value there, and that carries on to the op's output (through a
// slope bound of what follows) and to the ops after it. Gate 1 allows the slack on top of the
// class bound; gates 2 to 4 stay exact.

// ExpectIn is Expect in precision p. In BF16Precision the reference rounds as above and each
// output carries its Slack; slack reads an input's slack (nil or a nil result: none).
func ExpectIn(op device.Op, read Read, p device.Precision, slack Read) ([]Output, error) {
	outs, err := Expect(op, read)
	if err != nil || p != device.BF16Precision {
		return outs, err
	}
	r := &reader{op: device.Deref(op).OpName(), read: read}
	sr := &reader{op: r.op, read: slack}
	if slack == nil {
		sr.read = func(device.Tensor) ([]float64, error) { return nil, nil }
	}
	if err := expectBF16(device.Deref(op), r, sr, outs); err != nil {
		return nil, err
	}
	for _, o := range outs {
		for i, e := range o.Slack {
			if math.IsNaN(e) {
				o.Slack[i] = 0
			}
		}
	}
	return outs, nil
}

// rb rounds x to BF16 through float32, as a backend rounds its F32 value.
func rb(x float64) float64 { return Round(device.BF16, x) }

// BF16ULP is one BF16 ulp at x's rounding: how far the other rounding of a nearby value lies.
func BF16ULP(x float64) float64 {
	a := math.Abs(rb(x))
	switch {
	case math.IsNaN(a) || math.IsInf(a, 0):
		return 0
	case a < 0x1p-126:
		return 0x1p-133
	}
	_, e := math.Frexp(a) // a in [2^(e-1), 2^e)
	return math.Ldexp(1, e-1-7)
}

// at is s[i], or 0 when there is no slack.
func at(s []float64, i int) float64 {
	if s == nil {
		return 0
	}
	return s[i]
}

// actSlope bounds |act'(x)| for every activation of device.Act.
const actSlope = 1.2

// actBF16 is act(x) as BF16 precision rounds it (QuickGELU: each of its three ops), and its slack
// given x's slack ex.
func actBF16(a device.Act, x, ex float64) (float64, float64) {
	switch a {
	case device.ActNone:
		return x, ex
	case device.ActQuickGELU:
		t := rb(1.702 * x)
		s := rb(1 / (1 + math.Exp(-t)))
		return rb(x * s), actSlope*ex + math.Abs(x)*(0.25*BF16ULP(1.702*x)+BF16ULP(1/(1+math.Exp(-t)))) + BF16ULP(x*s)
	}
	y := Act(a, x)
	return rb(y), actSlope*ex + BF16ULP(y)
}

// output finds the output named name.
func output(outs []Output, name string) *Output {
	for i := range outs {
		if outs[i].Name == name {
			return &outs[i]
		}
	}
	return nil
}

// expectBF16 replaces the F32 references outs of op with BF16 precision's, and sets their slack.
func expectBF16(op device.Op, r, sr *reader, outs []Output) error {
	switch o := op.(type) {
	case device.Linear:
		m, k, n := o.X.Rows, o.X.Cols, o.W.Rows
		x, w, b, res := r.get("X", o.X), r.get("W", o.W), r.get("B", o.B), r.get("Res", o.Res)
		ex, eres := sr.get("X", o.X), sr.get("Res", o.Res)
		y, e := make([]float64, m*n), make([]float64, m*n)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				s, es := 0.0, 0.0
				for t := 0; t < k; t++ {
					s += x[i*k+t] * w[j*k+t]
					es += at(ex, i*k+t) * math.Abs(w[j*k+t])
				}
				if b != nil {
					if o.Round == device.RoundProduct {
						s, es = rb(s), es+BF16ULP(s)
					}
					s += b[j]
				}
				v, ev := actBF16(o.Act, rb(s), es+BF16ULP(s))
				if res != nil {
					z := v + res[i*n+j]
					v, ev = rb(z), ev+at(eres, i*n+j)+BF16ULP(z)
				}
				y[i*n+j], e[i*n+j] = v, ev
			}
		}
		set(outs, "Y", y, e)
	case device.RMSNorm:
		m, d := o.X.Rows, o.X.Cols
		x, w := r.get("X", o.X), r.get("W", o.W)
		s, es, ex := append([]float64(nil), x...), make([]float64, len(x)), sr.get("X", o.X)
		for i := range es {
			es[i] = at(ex, i)
		}
		if o.Res.Present() {
			res, eres := r.get("Res", o.Res), sr.get("Res", o.Res)
			for i := range s {
				z := x[i] + res[i]
				s[i], es[i] = rb(z), es[i]+at(eres, i)+BF16ULP(z)
			}
			if o.Sum.Present() {
				set(outs, "Sum", append([]float64(nil), s...), append([]float64(nil), es...))
			}
		}
		y, e := make([]float64, m*d), make([]float64, m*d)
		for i := 0; i < m; i++ {
			ss, ds := 0.0, 0.0
			for j := 0; j < d; j++ {
				v := s[i*d+j]
				ss += v * v
				ds += math.Abs(v) * es[i*d+j]
			}
			inv := 1 / math.Sqrt(ss/float64(d)+float64(o.Eps))
			rel := ds / (ss + float64(o.Eps)*float64(d)) // bounds inv's relative change
			for j := 0; j < d; j++ {
				z := s[i*d+j] * inv
				en := es[i*d+j]*inv + math.Abs(z)*rel + BF16ULP(z)
				z2 := rb(z) * w[j]
				y[i*d+j], e[i*d+j] = rb(z2), en*math.Abs(w[j])+BF16ULP(z2)
			}
		}
		set(outs, "Y", y, e)
	case device.LayerNorm:
		m, d := o.X.Rows, o.X.Cols
		x, w, b, ex := r.get("X", o.X), r.get("W", o.W), r.get("B", o.B), sr.get("X", o.X)
		y, e := make([]float64, m*d), make([]float64, m*d)
		for i := 0; i < m; i++ {
			row := x[i*d : (i+1)*d]
			mean, mex := 0.0, 0.0
			for j, v := range row {
				mean += v
				mex += at(ex, i*d+j)
			}
			mean /= float64(d)
			mex /= float64(d)
			vr, dv := 0.0, 0.0
			for j, v := range row {
				vr += (v - mean) * (v - mean)
				dv += math.Abs(v-mean) * (at(ex, i*d+j) + mex)
			}
			inv := 1 / math.Sqrt(vr/float64(d)+float64(o.Eps))
			rel := dv / (vr + float64(o.Eps)*float64(d))
			for j, v := range row {
				z := (v-mean)*inv*w[j] + b[j]
				dn := (at(ex, i*d+j)+mex)*inv + math.Abs(v-mean)*inv*rel
				y[i*d+j], e[i*d+j] = rb(z), dn*math.Abs(w[j])+BF16ULP(z)
			}
		}
		set(outs, "Y", y, e)
	case device.Rope:
		x, pos, ex := r.get("X", o.X), r.get("Pos", o.Pos), sr.get("X", o.X)
		inv, axis, err := device.RopeFreqs(o.HeadDim, o.Theta, o.Sections, o.Mode)
		if err != nil {
			return err
		}
		rows, width, na, half := o.X.Rows, o.X.Cols, len(o.Sections), o.HeadDim/2
		y, e := append([]float64(nil), x...), make([]float64, len(x))
		for i := range e {
			e[i] = at(ex, i)
		}
		for i := 0; i < rows; i++ {
			for h := 0; h < o.Heads; h++ {
				base := i*width + h*o.HeadDim
				for j := 0; j < half; j++ {
					ang := RopeAngle(int(pos[i*na+axis[j]]), inv[j])
					c, s := math.Cos(ang), math.Sin(ang)
					p, q := base+j, base+j+half
					a, b, ea, eb := x[p], x[q], at(ex, p), at(ex, q)
					if o.Mode == device.RopePerAxis { // F32 inside, one rounding
						z0, z1 := a*c-b*s, b*c+a*s
						y[p], e[p] = rb(z0), ea*math.Abs(c)+eb*math.Abs(s)+BF16ULP(z0)
						y[q], e[q] = rb(z1), eb*math.Abs(c)+ea*math.Abs(s)+BF16ULP(z1)
						continue
					}
					dc, ds := BF16ULP(c), BF16ULP(s)
					c, s = rb(c), rb(s)
					term := func(u, eu, f, df float64) (float64, float64) {
						return rb(u * f), eu*math.Abs(f) + math.Abs(u)*df + BF16ULP(u*f)
					}
					t1, e1 := term(a, ea, c, dc)
					t2, e2 := term(b, eb, s, ds)
					t3, e3 := term(b, eb, c, dc)
					t4, e4 := term(a, ea, s, ds)
					y[p], e[p] = rb(t1-t2), e1+e2+BF16ULP(t1-t2)
					y[q], e[q] = rb(t3+t4), e3+e4+BF16ULP(t3+t4)
				}
			}
		}
		set(outs, "X", y, e)
	case device.Attention:
		return expectAttentionBF16(o, r, outs)
	case device.Add:
		y, e := binaryBF16(r, sr, o.A, o.B, false)
		set(outs, "Y", y, e)
	case device.Mul:
		y, e := binaryBF16(r, sr, o.A, o.B, true)
		set(outs, "Y", y, e)
	case device.Activate:
		x, ex := r.get("X", o.X), sr.get("X", o.X)
		y, e := make([]float64, len(x)), make([]float64, len(x))
		for i, v := range x {
			y[i], e[i] = actBF16(o.Act, v, at(ex, i))
		}
		set(outs, "Y", y, e)
	case device.GLU:
		g, u, eg, eu := r.get("Gate", o.Gate), r.get("Up", o.Up), sr.get("Gate", o.Gate), sr.get("Up", o.Up)
		y, e := make([]float64, len(g)), make([]float64, len(g))
		for i := range g {
			a, ea := actBF16(o.Act, g[i], at(eg, i))
			z := a * u[i]
			y[i], e[i] = rb(z), ea*math.Abs(u[i])+at(eu, i)*math.Abs(a)+BF16ULP(z)
		}
		set(outs, "Y", y, e)
	case device.Copy:
		set(outs, "Y", nil, sr.get("X", o.X))
	case device.Gather:
		if ex := sr.get("X", o.X); ex != nil {
			e, err := Gather(ex, o.X.Cols, ints(r.get("Index", o.Index)))
			if err != nil {
				return err
			}
			set(outs, "Y", nil, e)
		}
	case device.Scatter:
		src, ey := sr.get("Src", o.Src), sr.get("Y", o.Y)
		if src != nil || ey != nil {
			if src == nil {
				src = make([]float64, o.Src.Rows*o.Src.Cols)
			}
			if ey == nil {
				ey = make([]float64, o.Y.Rows*o.Y.Cols)
			}
			e, err := Scatter(src, o.Src.Cols, ints(r.get("Index", o.Index)), ey)
			if err != nil {
				return err
			}
			set(outs, "Y", nil, e)
		}
	}
	if r.err != nil {
		return r.err
	}
	return sr.err
}

// binaryBF16 is A + B (or A · B with mul) rounded, and its slack.
func binaryBF16(r, sr *reader, ta, tb device.Tensor, mul bool) ([]float64, []float64) {
	a, b, ea, eb := r.get("A", ta), r.get("B", tb), sr.get("A", ta), sr.get("B", tb)
	y, e := make([]float64, len(a)), make([]float64, len(a))
	for i := range a {
		if mul {
			z := a[i] * b[i]
			y[i], e[i] = rb(z), at(ea, i)*math.Abs(b[i])+at(eb, i)*math.Abs(a[i])+BF16ULP(z)
		} else {
			z := a[i] + b[i]
			y[i], e[i] = rb(z), at(ea, i)+at(eb, i)+BF16ULP(z)
		}
	}
	return y, e
}

// set gives output name the reference y (nil: keep it) and the slack e.
func set(outs []Output, name string, y, e []float64) {
	if o := output(outs, name); o != nil {
		if y != nil {
			o.Want = y
		}
		o.Slack = e
	}
}

// expectAttentionBF16 is expectAttention in BF16 precision. Q, K and V are taken exact (an
// attention is a kernel of its own, its inputs as written).
func expectAttentionBF16(o device.Attention, r *reader, outs []Output) error {
	n, hd := o.Q.Rows, o.HeadDim
	q, k, v := r.get("Q", o.Q), r.get("K", o.K), r.get("V", o.V)
	if r.err != nil {
		return r.err
	}
	var y, e []float64
	var err error
	if o.Cache == nil {
		y, e, err = attentionFull(q, k, v, n, o.Heads, o.KVHeads, hd, float64(o.Scale), ints(r.get("Spans", o.Spans)), attendBF16)
	} else {
		rs, rp, pt := r.get("RowSeq", o.Rows.RowSeq), r.get("RowPos", o.Rows.RowPos), r.get("PageTable", o.Rows.PageTable)
		ck, cv := r.get("Cache.K", o.Cache.K), r.get("Cache.V", o.Cache.V)
		if r.err != nil {
			return r.err
		}
		pages := Pages{Table: ints(pt), MaxPages: o.Rows.PageTable.Cols, PageSize: o.Rows.PageSize, Rows: o.Cache.K.Rows}
		kt, vt := o.Cache.K.Buf.DType(), o.Cache.V.Buf.DType()
		y, e, _, _, err = attentionCached(q, k, v, n, o.Heads, o.KVHeads, hd, float64(o.Scale), ints(rs), ints(rp), pages, ck, cv,
			func(x float64) float64 { return Round(kt, x) }, func(x float64) float64 { return Round(vt, x) }, attendBF16)
	}
	if err != nil {
		return err
	}
	set(outs, "Y", y, e)
	return nil
}

// attendBF16 is attend in BF16 precision: the weights p = exp(s - max) go into P·V rounded (their
// sum is not), the output is rounded. A kernel rounds p against its running max, which may take
// it to the other rounding of p·2^j for some j: two ulps of p a key, on top of the output's one.
func attendBF16(q []float64, keys, values [][]float64, scale float64) ([]float64, []float64) {
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
	out, slack := make([]float64, len(q)), make([]float64, len(q))
	for j, v := range values {
		p, dp := rb(s[j]), 2*BF16ULP(s[j])
		for t := range out {
			out[t] += p * v[t] / sum
			slack[t] += dp * math.Abs(v[t]) / sum
		}
	}
	for t, x := range out {
		out[t], slack[t] = rb(x), slack[t]+BF16ULP(x)
	}
	return out, slack
}
