package cpu

import "tfc/runtime/device"

// attendSpansKernel is span attention (the vision tower's) through the FMA micro-kernel: per span
// and KV head, K is packed into panels of nr keys and V into panels of nr columns once; each block
// of mr query rows gets its scores from one q·Kᵀ, the softmax of attendRows, and its output from
// one P·V. Every score and output element is one FMA chain in key or column order, so a row's
// result depends only on its span, never on the rows launched with it.
func (be *Backend) attendSpansKernel(o device.Attention, q, k, v, y view, spans []int32) {
	kern := be.kern
	mr, nr := kern.mr, kern.nr
	hd, group := o.HeadDim, o.Heads/o.KVHeads
	rP, rOut := be.rounds("attention", "p"), be.rounds("attention", "out")
	hdPad := (hd + nr - 1) / nr * nr
	for s := 0; s+1 < len(spans); s++ {
		lo, hi := int(spans[s]), int(spans[s+1])
		nk := hi - lo
		if nk == 0 {
			continue
		}
		nkPad := (nk + nr - 1) / nr * nr
		blocks := (nk + mr - 1) / mr
		for g := 0; g < o.KVHeads; g++ {
			// kp: panel p holds keys p*nr.. as [hd][nr]; vp: panel c holds columns c*nr.. as [nk][nr]
			kp := make([]float32, nkPad*hd)
			vp := make([]float32, hdPad*nk)
			be.packKV(kp, vp, nk, hd, nr, k, v, g, func(j int) int { return lo + j })
			be.parallel(group*blocks, func(task int) {
				h, r0 := g*group+task/blocks, lo+(task%blocks)*mr
				rows := min(mr, hi-r0)
				qa := make([]float32, mr*hd)
				sc := make([]float32, mr*nkPad)
				out := make([]float32, mr*hdPad)
				tq := make([]float32, q.cols)
				for r := 0; r < rows; r++ {
					copy(qa[r*hd:(r+1)*hd], q.f32(r0+r, tq)[h*hd:(h+1)*hd])
				}
				for p := 0; p < nkPad/nr; p++ {
					kern.run(hd, qa, hd, kp[p*hd*nr:(p+1)*hd*nr], sc[p*nr:], nkPad)
				}
				sums := make([]float32, rows)
				for r := 0; r < rows; r++ {
					sums[r] = softmaxInPlace(sc[r*nkPad:r*nkPad+nk], o.Scale, rP)
				}
				for c := 0; c < hdPad/nr; c++ {
					kern.run(nk, sc, nkPad, vp[c*nk*nr:(c+1)*nk*nr], out[c*nr:], hdPad)
				}
				for r := 0; r < rows; r++ {
					oh := out[r*hdPad : r*hdPad+hd]
					for t := range oh {
						oh[t] = rnd(rOut, oh[t]/sums[r])
					}
					y.storeSeg(r0+r, h*hd, oh)
				}
			})
		}
	}
}

// attendCacheKernel is attention over the KV cache (decode rows and prompt chunks) through the FMA
// micro-kernel. Per sequence and KV head, the keys up to the furthest row of the launch are
// packed once; a row's scores come from q·Kᵀ over those panels and its output from P·V over its
// own keys only (the one-row kernel with the row's key count), so each score and output element
// is one FMA chain in key or column order, whatever else the launch holds.
func (be *Backend) attendCacheKernel(o device.Attention, q, ck, cv, y view, seqs, poss []int32, cacheRow func(s, p int) int) {
	kern := be.kern
	mr, nr := kern.mr, kern.nr
	hd, group := o.HeadDim, o.Heads/o.KVHeads
	rP, rOut := be.rounds("attention", "p"), be.rounds("attention", "out")
	wide := 4 * nr // the one-row kernel's width: four panels
	hdPad := (hd + wide - 1) / wide * wide
	// the launch's rows by sequence, in order
	var order []int32
	rowsOf := map[int32][]int{}
	for r, s := range seqs {
		if _, ok := rowsOf[s]; !ok {
			order = append(order, s)
		}
		rowsOf[s] = append(rowsOf[s], r)
	}
	for _, s := range order {
		rows := rowsOf[s]
		nk := 0
		for _, r := range rows {
			nk = max(nk, int(poss[r])+1)
		}
		nkPad := (nk + nr - 1) / nr * nr
		blocks := (len(rows) + mr - 1) / mr
		for g := 0; g < o.KVHeads; g++ {
			kp := make([]float32, nkPad*hd)
			vp := make([]float32, hdPad*nk)
			be.packKV(kp, vp, nk, hd, nr, ck, cv, g, func(j int) int { return cacheRow(int(s), j) })
			be.parallel(group*blocks, func(task int) {
				h, b0 := g*group+task/blocks, (task%blocks)*mr
				n := min(mr, len(rows)-b0)
				far := 0 // keys the block's furthest row reads
				for i := 0; i < n; i++ {
					far = max(far, int(poss[rows[b0+i]])+1)
				}
				farPad := (far + nr - 1) / nr * nr
				qa := make([]float32, mr*hd)
				sc := make([]float32, mr*nkPad)
				out := make([]float32, hdPad)
				tq := make([]float32, q.cols)
				for i := 0; i < n; i++ {
					copy(qa[i*hd:(i+1)*hd], q.f32(rows[b0+i], tq)[h*hd:(h+1)*hd])
				}
				for p := 0; p < farPad/nr; p++ {
					kern.run(hd, qa, hd, kp[p*hd*nr:(p+1)*hd*nr], sc[p*nr:], nkPad)
				}
				for i := 0; i < n; i++ {
					r := rows[b0+i]
					keys := int(poss[r]) + 1
					sr := sc[i*nkPad : i*nkPad+keys]
					sum := softmaxInPlace(sr, o.Scale, rP)
					clear(out)
					for c := 0; c < hdPad/wide; c++ {
						kern.row(keys, sr, vp[c*4*nk*nr:], nk*nr, out[c*wide:])
					}
					oh := out[:hd]
					for t := range oh {
						oh[t] = rnd(rOut, oh[t]/sum)
					}
					y.storeSeg(r, h*hd, oh)
				}
			})
		}
	}
}

// packKV packs KV head g of keys 0..nk-1 (key j at row at(j) of k and v): kp in panels of nr keys
// laid out [hd][nr], vp in panels of nr columns laid out [nk][nr].
func (be *Backend) packKV(kp, vp []float32, nk, hd, nr int, k, v view, g int, at func(j int) int) {
	be.chunks(nk, 64, func(j0, j1 int) {
		tk, tv := make([]float32, k.cols), make([]float32, v.cols)
		for j := j0; j < j1; j++ {
			kr := k.f32(at(j), tk)[g*hd : (g+1)*hd]
			vr := v.f32(at(j), tv)[g*hd : (g+1)*hd]
			p, c := j/nr, j%nr
			for t, x := range kr {
				kp[(p*hd+t)*nr+c] = x
			}
			for t, x := range vr {
				vp[((t/nr)*nk+j)*nr+t%nr] = x
			}
		}
	})
}
