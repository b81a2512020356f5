package cpu

import (
	"fmt"
	"math"

	"tfc/runtime/device"
)

// attention computes, per row and head, two-pass softmax attention in float32: scores q·k·Scale,
// exp(s − max) rounded from float64, then Σ e·v / Σ e in key order. With an FMA kernel each dot
// product is one fused chain (attendSpansKernel, attendCacheKernel); the Go loops round each
// product before adding.
func (be *Backend) attention(o device.Attention) error {
	const op = "attention"
	if o.KVHeads <= 0 || o.Heads <= 0 || o.Heads%o.KVHeads != 0 || o.HeadDim <= 0 {
		return fmt.Errorf("attention: Heads %d must be a positive multiple of KVHeads %d, HeadDim %d positive", o.Heads, o.KVHeads, o.HeadDim)
	}
	q, err := be.view(op, "Q", o.Q, floats...)
	if err != nil {
		return err
	}
	k, err := be.view(op, "K", o.K, floats...)
	if err != nil {
		return err
	}
	v, err := be.view(op, "V", o.V, floats...)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", o.Y, floats...)
	if err != nil {
		return err
	}
	n, hd := q.rows, o.HeadDim
	if err := shape(op, "Q", q, n, o.Heads*hd); err != nil {
		return err
	}
	if err := shape(op, "K", k, n, o.KVHeads*hd); err != nil {
		return err
	}
	if err := shape(op, "V", v, n, o.KVHeads*hd); err != nil {
		return err
	}
	if err := shape(op, "Y", y, n, o.Heads*hd); err != nil {
		return err
	}
	if o.Cache == nil {
		return be.attendSpans(o, q, k, v, y)
	}
	return be.attendCache(o, q, k, v, y)
}

// keyRows says where row j of the keys a query attends to lives.
type keyRows func(j int) int

func (be *Backend) attendSpans(o device.Attention, q, k, v, y view) error {
	const op = "attention"
	sp, err := be.view(op, "Spans", o.Spans, device.I32)
	if err != nil {
		return err
	}
	if sp.rows != 1 || sp.cols < 2 {
		return fmt.Errorf("attention: Spans is [%d,%d], want [1,S+1] cumulative row offsets", sp.rows, sp.cols)
	}
	spans := sp.ints(0)
	if spans[0] != 0 || int(spans[len(spans)-1]) != q.rows {
		return fmt.Errorf("attention: Spans %v must start at 0 and end at the row count %d", spans, q.rows)
	}
	spanOf := make([]int, q.rows)
	for s := 1; s < len(spans); s++ {
		if spans[s] < spans[s-1] {
			return fmt.Errorf("attention: Spans %v must not decrease", spans)
		}
		for r := spans[s-1]; r < spans[s]; r++ {
			spanOf[r] = s - 1
		}
	}
	if err := be.resolve(op, []operand{{"Q", &q}, {"K", &k}, {"V", &v}}, []operand{{"Y", &y}}); err != nil {
		return err
	}
	if be.kern != nil {
		be.attendSpansKernel(o, q, k, v, y, spans)
		return nil
	}
	be.attendRows(o, q, k, v, y, func(r int) (int, keyRows) {
		lo, hi := int(spans[spanOf[r]]), int(spans[spanOf[r]+1])
		return hi - lo, func(j int) int { return lo + j }
	})
	return nil
}

func (be *Backend) attendCache(o device.Attention, q, k, v, y view) error {
	const op = "attention"
	if o.Rows == nil {
		return fmt.Errorf("attention: a cache needs Rows (RowSeq, RowPos, PageTable)")
	}
	ck, err := be.view(op, "Cache.K", o.Cache.K, floats...)
	if err != nil {
		return err
	}
	cv, err := be.view(op, "Cache.V", o.Cache.V, floats...)
	if err != nil {
		return err
	}
	seq, err := be.view(op, "RowSeq", o.Rows.RowSeq, device.I32)
	if err != nil {
		return err
	}
	pos, err := be.view(op, "RowPos", o.Rows.RowPos, device.I32)
	if err != nil {
		return err
	}
	pt, err := be.view(op, "PageTable", o.Rows.PageTable, device.I32)
	if err != nil {
		return err
	}
	n, kw, ps := q.rows, o.KVHeads*o.HeadDim, o.Rows.PageSize
	if err := shape(op, "Cache.K", ck, ck.rows, kw); err != nil {
		return err
	}
	if err := shape(op, "Cache.V", cv, ck.rows, kw); err != nil {
		return err
	}
	if err := shape(op, "RowSeq", seq, 1, n); err != nil {
		return err
	}
	if err := shape(op, "RowPos", pos, 1, n); err != nil {
		return err
	}
	if ps <= 0 || ck.rows%ps != 0 {
		return fmt.Errorf("attention: PageSize %d must be positive and divide the cache's %d rows", ps, ck.rows)
	}
	if pt.cols == 0 {
		return fmt.Errorf("attention: PageTable has no columns")
	}
	cacheRow := func(s, p int) (int, error) {
		if s < 0 || s >= pt.rows {
			return 0, fmt.Errorf("attention: sequence slot %d outside the PageTable's %d slots", s, pt.rows)
		}
		if p < 0 || p/ps >= pt.cols {
			return 0, fmt.Errorf("attention: position %d outside the %d pages of %d rows a slot holds", p, pt.cols, ps)
		}
		page := int(pt.ints(s)[p/ps])
		if page < 0 || page >= ck.rows/ps {
			return 0, fmt.Errorf("attention: PageTable[%d,%d] = %d outside the cache's %d pages", s, p/ps, page, ck.rows/ps)
		}
		return page*ps + p%ps, nil
	}
	seqs, poss := seq.ints(0), pos.ints(0)
	// every page a row will read must be mapped before anything is written
	for i := 0; i < n; i++ {
		for p := 0; p <= int(poss[i]); p += ps {
			if _, err := cacheRow(int(seqs[i]), p); err != nil {
				return fmt.Errorf("%w (row %d)", err, i)
			}
		}
		if _, err := cacheRow(int(seqs[i]), int(poss[i])); err != nil {
			return fmt.Errorf("%w (row %d)", err, i)
		}
	}
	ins := []operand{{"Q", &q}, {"K", &k}, {"V", &v}, {"RowSeq", &seq}, {"RowPos", &pos}, {"PageTable", &pt}}
	outs := []operand{{"Y", &y}, {"Cache.K", &ck}, {"Cache.V", &cv}}
	if err := be.resolve(op, ins, outs); err != nil {
		return err
	}
	seqs, poss = seq.ints(0), pos.ints(0)
	tmp := make([]float32, kw)
	for i := 0; i < n; i++ {
		row, _ := cacheRow(int(seqs[i]), int(poss[i]))
		ck.storeRow(row, k.f32(i, tmp))
		cv.storeRow(row, v.f32(i, tmp))
	}
	if be.kern != nil {
		be.attendCacheKernel(o, q, ck, cv, y, seqs, poss, func(s, p int) int { c, _ := cacheRow(s, p); return c })
		return nil
	}
	be.attendRows(o, q, ck, cv, y, func(r int) (int, keyRows) {
		s := int(seqs[r])
		return int(poss[r]) + 1, func(j int) int { c, _ := cacheRow(s, j); return c }
	})
	return nil
}

// softmaxInPlace turns the dot products s into exp(s·scale − max), rounded from float64, and
// returns their sum in key order; a NaN anywhere makes the max, and so every weight, NaN. With
// rp the weights are then rounded to BF16 (the sum is of the F32 weights).
func softmaxInPlace(s []float32, scale float32, rp bool) float32 {
	mx := float32(math.Inf(-1))
	for j := range s {
		s[j] *= scale
		if s[j] > mx || s[j] != s[j] {
			mx = s[j]
		}
	}
	var sum float32
	for j := range s {
		s[j] = float32(math.Exp(float64(s[j] - mx)))
		sum += s[j]
	}
	roundAll(rp, s)
	return sum
}

// attendRows runs attention for every row in parallel; keys(r) gives a row's key count and
// where each key lives in k and v.
func (be *Backend) attendRows(o device.Attention, q, k, v, y view, keys func(r int) (int, keyRows)) {
	hd, group := o.HeadDim, o.Heads/o.KVHeads
	rP, rOut := be.rounds("attention", "p"), be.rounds("attention", "out")
	be.chunks(q.rows, 1, func(lo, hi int) {
		tq, tk, tv := make([]float32, q.cols), make([]float32, k.cols), make([]float32, v.cols)
		out := make([]float32, y.cols)
		var s []float32
		for r := lo; r < hi; r++ {
			nk, at := keys(r)
			if cap(s) < nk {
				s = make([]float32, nk)
			}
			s = s[:nk]
			qr := q.f32(r, tq)
			for h := 0; h < o.Heads; h++ {
				g := h / group
				qh := qr[h*hd : (h+1)*hd]
				for j := range s {
					kh := k.f32(at(j), tk)[g*hd : (g+1)*hd]
					var d float32
					for t, x := range qh {
						d += x * kh[t]
					}
					s[j] = d
				}
				sum := softmaxInPlace(s, o.Scale, rP)
				oh := out[h*hd : (h+1)*hd]
				clear(oh)
				for j, e := range s {
					vh := v.f32(at(j), tv)[g*hd : (g+1)*hd]
					for t, x := range vh {
						oh[t] += e * x
					}
				}
				for t := range oh {
					oh[t] = rnd(rOut, oh[t]/sum)
				}
			}
			y.storeRow(r, out)
		}
	})
}
