package hip

import (
	"fmt"
	"strings"

	"tfc/runtime/device"
)

// threads is the block size of every kernel; the reductions in kernels/tfc_kernels.h assume it.
const threads = 256

// gemm: a linear, then its epilogue passes over the C tile in LDS. Pointwise ops join the pass
// before them; each rope is a pass of its own, because it pairs columns j and j+head_dim/2.
type gemm struct {
	k          Kernel
	n          int
	bm, bn, bk int
	ropeOf     map[int][]int // base op → the ropes that rotate slices of its Y
	pairs      bool          // launches of at most smallRows rows take smallBN-column tiles of rotary pairs
	mma        bool          // on CUDA, the tile is tfc_gemm_mma's (see useMMA)
	glu        int           // with a glu over the two halves of Y, the gate's width: a tile holds gate columns and their up partners
}

func newGEMM(k Kernel) (template, error) {
	lin := k.Ops[0]
	// A decoder's linears take 32-row tiles: more blocks for decode rounds of 9-64 rows (decode
	// at batch 32 and 64 1.16-1.22× faster than with 64 rows) and prompt chunks 2-8% faster. A
	// tower's take 64 (its 7,200-row launches were 5% slower at 32). H100 receipt:
	// docs/receipts/2026-12-06-h100-gemm-tiles.md.
	f := &gemm{k: k, n: lin.int("N"), bm: 32, bn: 64, bk: 16, ropeOf: map[int][]int{}}
	if k.Role == "vision" {
		f.bm = 64
	}
	hd, base := 0, 0
	var covered [][2]int
	for i := 1; i < len(k.Ops); i++ {
		o := k.Ops[i]
		switch {
		case o.Kind == "glu" && i == 1 && len(k.Ops) == 2:
			half := f.n / 2
			if o.int("gate_col") != 0 || o.int("up_col") != half || o.int("N") != half || 2*half != f.n || lin.Act != "" || lin.Flags["has_res"] {
				return nil, fmt.Errorf("kernel %s: a glu after a linear takes the two halves of its plain output as gate and up", k.Name)
			}
			f.glu = half
		case o.Kind == "rope":
			if err := checkRope(k, i); err != nil {
				return nil, err
			}
			h := o.int("head_dim")
			if hd != 0 && h != hd {
				return nil, fmt.Errorf("kernel %s: ropes with head_dim %d and %d cannot share a linear kernel", k.Name, hd, h)
			}
			if h%2 != 0 {
				return nil, fmt.Errorf("kernel %s: rope head_dim %d is odd; rotate-half pairs need an even head", k.Name, h)
			}
			lo, hi := o.int("col"), o.int("col")+o.int("heads")*h
			if lo%h != 0 || hi > f.n {
				return nil, fmt.Errorf("kernel %s: op %d rotates columns [%d,%d) of a %d-column output; they must be whole heads inside it", k.Name, i, lo, hi, f.n)
			}
			for _, c := range covered {
				if lo < c[1] && c[0] < hi {
					return nil, fmt.Errorf("kernel %s: op %d rotates columns [%d,%d) that another rope also rotates", k.Name, i, lo, hi)
				}
			}
			covered = append(covered, [2]int{lo, hi})
			hd = h
			f.ropeOf[base] = append(f.ropeOf[base], i)
		case isPointwise(o.Kind):
			if err := checkPointwise(k, i, i+1, f.n); err != nil {
				return nil, err
			}
			base, covered = i, nil
		default:
			return nil, fmt.Errorf("kernel %s: op %d (%s) cannot follow a linear in one kernel; start a new kernel", k.Name, i, o.Kind)
		}
	}
	if hd > 0 {
		// A tile holds whole heads: one head, or as many as make its width a multiple of 16.
		f.bn = hd
		for f.bn%16 != 0 {
			f.bn += hd
		}
		if hd > 80 {
			f.bm = 32 // two stages of a 64-row tile of wider heads pass the static LDS
		}
		// A half head of a multiple of smallBN/2 columns splits into small tiles of rotary pairs.
		// Tiles start on heads; each head's rope pass checks that its rope rotates it.
		f.pairs = hd%smallBN == 0
	}
	f.mma = f.useMMA()
	return f, nil
}

// The tensor-core GEMM's LDS steps with three terms and with one and its row padding, as
// kernels/tfc_mma_gemm.h names them (TFC_MMA_BK, TFC_MMA_BK1, TFC_MMA_LD), and the static LDS a
// block may declare.
const mmaBK, mmaBK1, mmaPad, staticLDS = 32, 64, 8, 48 * 1024

// useMMA says whether the linear is computed on tensor cores under CUDA (tfc_gemm_mma for tiles,
// tfc_gemm_mma_rows, the same bits, for launches of at most smallRows rows) and on the matrix
// cores of CDNA and RDNA3 (tfc_gemm_amd at every M): with F32 activations and BF16 weights, and
// with tiles of whole 16×16 blocks whose warps and LDS both layouts can lay out. Other AMD
// targets keep tfc_gemm_tile.
func (f *gemm) useMMA() bool {
	lin := f.k.Ops[0]
	if lin.DTypes["W"] != "BF16" || (lin.DTypes["X"] != "" && lin.DTypes["X"] != "F32") {
		return false
	}
	wm := f.bm / 16
	if f.bm%16 != 0 || wm < 1 || 8%wm != 0 || f.bn%16 != 0 {
		return false
	}
	// floats: two BF16 stages of three planes of X, or of one at the wider step; the C tile
	stages3, stages1, c := (3*f.bm+f.bn)*(mmaBK+mmaPad), (f.bm+f.bn)*(mmaBK1+mmaPad), f.bm*(f.bn+1)
	return 4*max(stages3, stages1, c, mmaRowsFloats(f.bm, f.bn), mmaRowsFloats(f.bm, smallBN)) <= staticLDS
}

// mmaRowsFloats is the LDS in floats tfc_gemm_mma_rows takes at tile bm×bn (tfc_mma_rows_smem):
// the C tile and, when fewer than 8 column tiles leave warps to split K, two sets of chunk-sum
// slots: t tiles a warp, groups of them, wpt warps a group, u chunks a warp a wave (the most the
// header's TFC_ROWS_TILE_CHUNKS allows).
func mmaRowsFloats(bm, bn int) int {
	nt8, slots := bn/8, 0
	if nt8 < 8 {
		t := 1
		if nt8%2 == 0 {
			t = 2
		}
		groups := nt8 / t
		wpt, u := 8/groups, 4/t
		slots = 2 * groups * wpt * u * t * 128
	}
	return bm*(bn+1) + slots
}

// smallBN is the column tile of a GEMM launched on at most smallRows rows (decode rounds): more
// blocks than the BN tile, since such a launch is bound by how many multiprocessors stream its
// weights. A rope GEMM's small tile holds smallBN/2 rotary pairs of one head (f.pairs).
// kernels/tfc_kernels.h names them TFC_SMALL_BN and TFC_SMALL_ROWS.
const smallBN, smallRows = 16, 8

// smallSuffix ends the name of a kernel's function for launches of at most smallRows rows: the
// same body with small a constant, so the compiler keeps only the small-row layout in it and
// each function has the registers of its own layout.
const smallSuffix = "_rows"

// A decoder's plain and rope linears launched on more than smallRows and at most midRows rows
// take tiles of midBM rows, in the function named with midSuffix: twice the blocks of 32-row
// tiles (decode at batch 16 and 32 1.35× faster than on 64-row tiles, on the H100,
// docs/receipts/2026-12-06-h100-gemm-tiles.md). The gate/up GEMM is as fast on 32 rows, and a
// linear of more than midMaxN columns (the logits) has blocks enough without: at 64 rows the
// logits took 456 µs on 16-row tiles against 366 on 32 (each column tile's weights read four
// times), at 16 rows 182 against 211; serving many pages runs the larger batches.
const midBM, midRows, midMaxN, midSuffix = 16, 64, 16384, "_mid"

// A tensor-core linear whose tile holds plain columns (or glu pairs) has a fill function for
// launches of more than fillRows rows on a backend running the fill layout (CUDA): tiles of
// fillBM rows by fillBN columns, fillWM warps along the rows, whose fillStages stages of X (F32)
// and W (BF16) stream through dynamic LDS by cp.async (kernels/tfc_mma_gemm.h's
// tfc_gemm_mma_fill; the kernel static_asserts that fillLDS covers tfc_fill_smem). A linear of
// at most fillNarrowN columns takes fillBN/2: twice the column blocks of a 512-row prompt chunk.
const fillBM, fillBN, fillWM, fillRows, fillStages, fillNarrowN, fillSuffix = 128, 128, 2, 256, 4, 4096, "_fill"

// fill says whether the linear has a fill function.
func (f *gemm) fill() bool { return f.mma && len(f.ropeOf) == 0 }

// fillTile is the fill function's BN and warps along the rows.
func (f *gemm) fillTile() (bn, wm int) {
	if f.glu == 0 && f.n <= fillNarrowN {
		return fillBN / 2, 2 * fillWM
	}
	return fillBN, fillWM
}

// fillLDS is the dynamic LDS in bytes of a fill tile bm×bn: its stages of F32 X rows and BF16 W
// rows, mmaBK + mmaPad elements each, then two steps of X's three BF16 terms, or the C tile where
// that is larger.
func fillLDS(bm, bn int) int {
	return max(fillStages*(bm*(mmaBK+mmaPad)*4+bn*(mmaBK+mmaPad)*2)+2*3*bm*(mmaBK+mmaPad)*2, bm*(bn+1)*4)
}

// FillRows is the row count above which kernel k launches its fill function on a backend running
// the fill layout, 0 when it has none: a contract's launch passes it to run that function.
func FillRows(k Kernel) int {
	t, err := newGEMM(k)
	if f, ok := t.(*gemm); err == nil && ok && f.fill() {
		return fillRows
	}
	return 0
}

// A tensor-core linear with the mid-size function has a band function too, launched instead on
// CUDA (device.Layouts.Bands) at more than smallRows and at most bandRows rows: the small-row
// layout (tfc_gemm_mma_rows, its warps splitting K by chunks, weights streamed from global
// memory) on each band of bandBM rows, two mma fragments high that share each weight fragment,
// over the small layout's column blocks. At 16 rows the mid function's 64-column tiles gave the
// down projection 24 blocks for 132 multiprocessors (118 µs against 33 at 8 rows,
// docs/receipts/2026-12-06-h100-gemm-tiles.md); bands of 16 rows gave it 96 a band, and on the
// H100 decode at batch 16 went 2,266 → 3,785 tok/s and 32 3,971 → 4,897, but 64 6,392 → 6,237
// (four bands each streaming the weights, docs/receipts/2026-12-07-h100-bands-fill.md). Bands of
// 32 rows stream them once up to 32 rows and twice at 64, so they take 33-64 rows from the mid
// function too.
const bandBM, bandRows, bandSuffix = 32, 64, "_band"

// band says whether the linear has the band function.
func (f *gemm) band() bool { return f.mma && f.mid() && (len(f.ropeOf) == 0 || f.pairs) }

// mid says whether the linear has the mid-size function.
func (f *gemm) mid() bool {
	return f.k.Role != "vision" && f.glu == 0 && f.bm > midBM && f.n <= midMaxN
}

// bmExpr is BM as the body declares it: midBM in the mid-size function, fillBM in the fill one.
func (f *gemm) bmExpr() string {
	bm := fmt.Sprint(f.bm)
	if f.mid() {
		bm = fmt.Sprintf("mid ? %d : %d", midBM, f.bm)
	}
	if f.band() {
		bm = fmt.Sprintf("band ? %d : (%s)", bandBM, bm)
	}
	if f.fill() {
		if f.mid() {
			bm = "(" + bm + ")"
		}
		bm = "fill ? FBM : " + bm
	}
	return bm
}

// bnExpr is BN as the body declares it: the fill tile's in the fill function.
func (f *gemm) bnExpr() string {
	if bn, _ := f.fillTile(); f.fill() && bn != f.bn {
		return fmt.Sprintf("fill ? FBN : %d", f.bn)
	}
	return fmt.Sprint(f.bn)
}

func (f *gemm) launches() []device.Launch {
	l := device.Launch{Symbol: f.k.Name, Threads: threads, RowsPerBlock: f.bm, GridY: ceilDiv(f.n, f.bn)}
	switch {
	case f.glu > 0:
		l.GridY = ceilDiv(f.glu, f.bn/2)
		l.SmallRows, l.SmallRowsGridY = smallRows, ceilDiv(f.glu, smallBN/2)
	case len(f.ropeOf) == 0:
		l.SmallRows, l.SmallRowsGridY = smallRows, ceilDiv(f.n, smallBN)
	case f.pairs:
		l.SmallRows, l.SmallRowsGridY = smallRows, ceilDiv(f.n, f.bn)*(f.bn/smallBN)
	}
	if l.SmallRows > 0 {
		l.SmallSymbol = f.k.Name + smallSuffix
	}
	if f.mid() {
		l.MidRows, l.MidRowsPerBlock, l.MidSymbol = midRows, midBM, f.k.Name+midSuffix
	}
	if f.band() {
		l.BandRows, l.BandRowsPerBlock, l.BandSymbol = bandRows, bandBM, f.k.Name+bandSuffix
	}
	l.FlopsPerRow, l.WeightBytes, l.RowBytes = f.work()
	if f.fill() {
		bn, _ := f.fillTile()
		l.FillRows, l.FillRowsPerBlock, l.FillGridY, l.FillLDS, l.FillSymbol = fillRows, fillBM, ceilDiv(f.n, bn), fillLDS(fillBM, bn), f.k.Name+fillSuffix
		if f.glu > 0 {
			l.FillGridY = ceilDiv(f.glu, bn/2)
		}
	}
	return []device.Launch{l}
}

// work is the linear's floating-point operations a row (a multiply and an add a weight), the
// bytes of its weights and bias, and the bytes a row reads and writes: X, the residual, Y.
func (f *gemm) work() (flopsPerRow, weightBytes, rowBytes int64) {
	lin := f.k.Ops[0]
	n, k, out := int64(f.n), int64(lin.int("K")), int64(f.n)
	if f.glu > 0 {
		out = int64(f.glu)
	}
	size := func(field string) int64 { return int64(lin.DType(field).Size()) }
	weightBytes = n * k * size("W")
	if lin.Flags["has_bias"] {
		weightBytes += n * size("B")
	}
	rowBytes = k*size("X") + out*size("Y")
	if lin.Flags["has_res"] {
		rowBytes += out * size("Res")
	}
	return 2 * n * k, weightBytes, rowBytes
}

func (f *gemm) tile() string {
	t := fmt.Sprintf("%dx%d C tile, K step %d", f.bm, f.bn, f.bk)
	switch {
	case f.glu > 0:
		t += fmt.Sprintf(" of %d gate columns and their up partners; %d pairs on at most %d rows", f.bn/2, smallBN/2, smallRows)
	case len(f.ropeOf) == 0:
		t += fmt.Sprintf("; %d columns on at most %d rows", smallBN, smallRows)
	case f.pairs:
		t += fmt.Sprintf("; %d rotary pairs on at most %d rows", smallBN/2, smallRows)
	}
	if f.mma {
		t += fmt.Sprintf("; tensor cores on CUDA (mma.sync BF16, K step %d, %d in BF16 precision)", mmaBK, mmaBK1)
	}
	if f.fill() {
		bn, wm := f.fillTile()
		t += fmt.Sprintf("; above %d rows on CUDA with the fill layout, %dx%d tiles over %d warps along the rows, %d cp.async stages in %d bytes of dynamic LDS", fillRows, fillBM, bn, wm, fillStages, fillLDS(fillBM, bn))
	}
	return t
}

func (f *gemm) mutations() []Mutation { return []Mutation{OffByOneBound, WrongStride, MissingBarrier} }

// tileCall renders the tile's computation: when small holds, the TFC_SMALL_BN-column tile with
// smallArgs, else the BN tile with args; where f.mma on tensor cores under CUDA and on AMD's
// matrix cores under TFC_AMD_MATRIX (16 rows of TFC_SMALL_BN columns when small), elsewhere
// tfc_gemm_rows and tile (tfc_gemm_tile's call).
// With a fill function, the fill tile takes fillArgs and every other layout the tile TBM×TBN.
func (f *gemm) tileCall(g *gen, small, smallArgs, args, fillArgs, tile string) {
	bm, bn := f.tileNames()
	if f.mma {
		rows := ""
		if f.band() {
			rows = fmt.Sprintf(", TFC_MMA_TERMS, band ? %d : TFC_SMALL_ROWS", bandBM)
		}
		g.raw("#if TFC_CUDA")
		g.line("if (%s)", small)
		g.line("  tfc_gemm_mma_rows<%s, TFC_SMALL_BN, N, K, MUT%s>%s", bm, rows, smallArgs)
		if f.fill() {
			_, wm := f.fillTile()
			g.line("else if (fill)")
			g.line("  tfc_gemm_mma_fill<FBM, FBN, N, K, MUT, TFC_MMA_TERMS, %d>%s", wm, fillArgs)
		}
		g.line("else")
		g.line("  tfc_gemm_mma<%s, %s, N, K, MUT>%s", bm, bn, args)
		g.raw("#elif TFC_AMD_MATRIX")
		g.line("if (%s)", small)
		g.line("  tfc_gemm_amd<16, TFC_SMALL_BN, N, K, MUT>%s", smallArgs)
		g.line("else")
		g.line("  tfc_gemm_amd<%s, %s, N, K, MUT>%s", bm, bn, args)
		g.raw("#else")
	}
	if f.band() {
		g.line("if (band)  // a band of up to %d rows: the tile, not tfc_gemm_rows's at most TFC_SMALL_ROWS", bandBM)
		g.line("  tfc_gemm_tile<%d, TFC_SMALL_BN, BK, N, K, MUT>%s", bandBM, smallArgs)
		g.line("else if (%s)", small)
	} else {
		g.line("if (%s)", small)
	}
	g.line("  tfc_gemm_rows<%s, TFC_SMALL_BN, BK, N, K, MUT, tfc_gemm_smem<%s, %s, BK>::floats>%s", bm, bm, bn, smallArgs)
	g.line("else")
	g.line("  %s", tile)
	if f.mma {
		g.raw("#endif")
	}
}

// tileNames are the names of the tile the layouts other than the fill one take: TBM×TBN in a
// kernel with a fill function (in the fill function a small tile those never run on, so that
// none of them is built at the fill tile's size), else BM×BN.
func (f *gemm) tileNames() (bm, bn string) {
	if f.fill() {
		return "TBM", "TBN"
	}
	return "BM", "BN"
}

func (f *gemm) body(g *gen) error {
	lin := g.k.Ops[0]
	bm, bn := f.tileNames()
	args := "(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);"
	tile := fmt.Sprintf("tfc_gemm_tile<%s, %s, BK, N, K, MUT>", bm, bn) + args
	if !f.mma {
		g.line("constexpr int BM = %s, BN = %d, BK = %d, N = %d, K = %d;", f.bmExpr(), f.bn, f.bk, f.n, lin.int("K"))
		g.line("__shared__ float smem[tfc_gemm_smem<BM, BN, BK>::floats];")
	} else {
		if f.fill() {
			fbn, _ := f.fillTile()
			g.line("constexpr int FBM = %d, FBN = %d;  // the fill tile", fillBM, fbn)
		}
		g.line("constexpr int BM = %s, BN = %s, N = %d, K = %d;", f.bmExpr(), f.bnExpr(), f.n, lin.int("K"))
		if f.fill() {
			g.line("constexpr int TBM = fill ? 16 : BM, TBN = fill ? 16 : BN;  // the other layouts' tile")
		}
		g.raw("#if TFC_CUDA || TFC_AMD_MATRIX  // tensor (matrix) cores: the same path at every M")
		if f.fill() {
			fbn, _ := f.fillTile()
			lds := fillLDS(fillBM, fbn)
			g.line("__shared__ __align__(16) float tile_lds[fill ? 4 : tfc_mma_floats<TBM, TBN>];")
			g.line("float* const smem = fill ? tfc_fill_lds() : tile_lds;")
			g.line("static_assert(tfc_fill_smem<FBM, FBN>::bytes <= %d, \"the launch passes %d bytes of dynamic LDS (the schedule's fill_lds)\");", lds, lds)
		} else {
			g.line("__shared__ __align__(16) float smem[tfc_mma_floats<BM, BN>];")
		}
		g.raw("#else")
		g.line("constexpr int BK = %d;", f.bk)
		g.line("__shared__ float smem[tfc_gemm_smem<BM, BN, BK>::floats];")
		g.raw("#endif")
	}
	if f.glu > 0 {
		// A tile holds bn / 2 gate columns and their up partners HALF columns on, so that the
		// epilogue pairs them; launches of at most TFC_SMALL_ROWS rows take TFC_SMALL_BN columns.
		g.line("constexpr int HALF = %d;", f.glu)
		g.line("const int bn = small ? TFC_SMALL_BN : BN;")
		g.line("const int m0 = blockIdx.x * BM, n0 = blockIdx.y * (bn / 2);")
		cols := func(bn string) string {
			return fmt.Sprintf("(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, tfc_glu_pairs<%s, HALF>{n0});", bn)
		}
		f.tileCall(g, "small", cols("TFC_SMALL_BN"), cols(bn), cols("FBN"), fmt.Sprintf("tfc_gemm_tile<%s, %s, BK, N, K, MUT>", bm, bn)+cols(bn))
		f.gluPass(g)
		return nil
	}
	if len(f.ropeOf) == 0 {
		// Launches of at most TFC_SMALL_ROWS rows take tiles TFC_SMALL_BN columns wide.
		g.line("const int bn = small ? TFC_SMALL_BN : BN;")
		g.line("const int m0 = blockIdx.x * BM, n0 = blockIdx.y * bn;")
		f.tileCall(g, "small", args, args, args, tile)
	} else if f.pairs {
		// Launches of at most TFC_SMALL_ROWS rows take tiles of TFC_SMALL_BN / 2 rotary pairs, BN /
		// TFC_SMALL_BN a head: a head's columns n0 + [0, bn / 2), then their partners BN / 2 on.
		pairs := "(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, tfc_rope_pairs<BN / 2>{n0});"
		g.line("const bool pairs = small;")
		g.line("const int bn = pairs ? TFC_SMALL_BN : BN, tiles = pairs ? BN / TFC_SMALL_BN : 1;")
		g.line("const int j0 = blockIdx.y %% tiles * (bn / 2), m0 = blockIdx.x * BM, n0 = blockIdx.y / tiles * BN + j0;")
		f.tileCall(g, "pairs", pairs, args, args, tile)
	} else {
		g.line("constexpr int bn = BN;")
		g.line("const int m0 = blockIdx.x * BM, n0 = blockIdx.y * bn;")
		if f.mma {
			g.raw("#if TFC_CUDA")
			g.line("if (M <= TFC_SMALL_ROWS)")
			g.line("  tfc_gemm_mma_rows<BM, BN, N, K, MUT>%s", args)
			g.line("else")
			g.line("  tfc_gemm_mma<BM, BN, N, K, MUT>%s", args)
			g.raw("#elif TFC_AMD_MATRIX")
			g.line("tfc_gemm_amd<BM, BN, N, K, MUT>%s", args)
			g.raw("#else")
			g.line("%s", tile)
			g.raw("#endif")
		} else {
			g.line("%s", tile)
		}
	}
	// Split the epilogue into passes: runs of pointwise ops, and single ropes.
	var passes [][]int
	for i := 0; i < len(g.k.Ops); i++ {
		if g.k.Ops[i].Kind == "rope" || len(passes) == 0 || g.k.Ops[passes[len(passes)-1][0]].Kind == "rope" {
			passes = append(passes, []int{i})
			continue
		}
		passes[len(passes)-1] = append(passes[len(passes)-1], i)
	}
	for p, ops := range passes {
		last := p == len(passes)-1
		if g.k.Ops[ops[0]].Kind == "rope" {
			if err := f.ropePass(g, ops[0], last); err != nil {
				return err
			}
		} else {
			f.pointwisePass(g, ops, last)
		}
		if !last {
			g.line("__syncthreads();")
		}
	}
	return nil
}

func (f *gemm) pointwisePass(g *gen, ops []int, last bool) {
	g.open("for (int e = threadIdx.x; e < BM * bn; e += %d)", threads)
	if f.pairs {
		g.line("const int r = e / bn, c = e %% bn, m = m0 + r, n = n0 + (c < bn / 2 ? c : c - bn / 2 + BN / 2);")
	} else {
		g.line("const int r = e / bn, c = e %% bn, m = m0 + r, n = n0 + c;")
	}
	g.line("if (m >= M || n >= N) continue;")
	g.line("float v = smem[r * (bn + 1) + c];")
	for _, i := range ops {
		o := g.k.Ops[i]
		if i == 0 {
			if o.Flags["has_bias"] && o.Flags["round_product"] {
				g.line("v = tfc_rnd(tfc_rnd(v) + tfc_ld(op0_B + n));")
			} else if o.Flags["has_bias"] {
				g.line("v = tfc_rnd(v + tfc_ld(op0_B + n));")
			} else {
				g.line("v = tfc_rnd(v);")
			}
			if a := acts[o.actName()]; a != "" {
				g.line("v = tfc_rnd(%s(v));", a)
			}
			if o.Flags["has_res"] {
				g.line("v = tfc_rnd(v + %s);", load(0, "Res", "m", "n"))
			}
			if !o.Flags["internal"] {
				g.line("%s", f.storeUnlessRoped(i, store(0, "Y", "m", "n", "v")))
			}
			continue
		}
		if ropes := f.ropeOf[i]; len(ropes) > 0 && !o.Flags["internal"] {
			// The op's store skips the columns its ropes will write.
			inner := &gen{k: g.k, mut: g.mut}
			inner.pointwiseStep(i, "m", "n")
			lines := strings.Split(strings.TrimSpace(inner.b.String()), "\n")
			for _, l := range lines[:len(lines)-1] {
				g.line("%s", l)
			}
			g.line("%s", f.storeUnlessRoped(i, lines[len(lines)-1]))
			continue
		}
		g.pointwiseStep(i, "m", "n")
	}
	if !last {
		g.line("smem[r * (bn + 1) + c] = v;")
	}
	g.close()
}

// gluPass is the epilogue of a glu over the halves of the linear's output: each gate column and
// its up partner get their bias, the linear's Y stores both unless internal, and the glu stores
// act(gate) * up, each rounded where the separate ops round (pointwiseStep).
func (f *gemm) gluPass(g *gen) {
	lin := g.k.Ops[0]
	g.open("for (int e = threadIdx.x; e < BM * (bn / 2); e += %d)", threads)
	g.line("const int r = e / (bn / 2), c = e %% (bn / 2), m = m0 + r, n = n0 + c;")
	g.line("if (m >= M || n >= HALF) continue;")
	g.line("float v = smem[r * (bn + 1) + c], up = smem[r * (bn + 1) + c + bn / 2];")
	if lin.Flags["has_bias"] {
		g.line("v = tfc_rnd(v + tfc_ld(op0_B + n));")
		g.line("up = tfc_rnd(up + tfc_ld(op0_B + HALF + n));")
	} else {
		g.line("v = tfc_rnd(v), up = tfc_rnd(up);")
	}
	if !lin.Flags["internal"] {
		g.line("%s", store(0, "Y", "m", "n", "v"))
		g.line("%s", store(0, "Y", "m", "HALF + n", "up"))
	}
	if a := acts[g.k.Ops[1].actName()]; a != "" {
		g.line("v = tfc_rnd(tfc_rnd(%s(v)) * up);", a)
	} else {
		g.line("v = tfc_rnd(v * up);")
	}
	g.line("%s", store(1, "Y", "m", "n", "v"))
	g.close()
}

// storeUnlessRoped guards the store of op i's Y when later ropes write some of its columns.
func (f *gemm) storeUnlessRoped(i int, st string) string {
	var cond []string
	for _, r := range f.ropeOf[i] {
		o := f.k.Ops[r]
		cond = append(cond, fmt.Sprintf("(n >= %d && n < %d)", o.int("col"), o.int("col")+o.int("heads")*o.int("head_dim")))
	}
	if len(cond) == 0 {
		return st
	}
	return fmt.Sprintf("if (!(%s)) %s", strings.Join(cond, " || "), st)
}

func (f *gemm) ropePass(g *gen, i int, last bool) error {
	o := g.k.Ops[i]
	lo := o.int("col")
	hi := lo + o.int("heads")*o.int("head_dim")
	// c is the tile column of the pair's first element and half the tile columns to its partner,
	// out the output columns to it; j is the pair's index within its head's half.
	half, out := "bn / 2", "BN / 2"
	if f.pairs { // a small tile holds pairs of one head
		g.open("if (n0 >= %d && n0 < %d)", lo, hi)
		g.open("for (int e = threadIdx.x; e < BM * (bn / 2); e += %d)", threads)
		g.line("const int r = e / (bn / 2), c = e %% (bn / 2), j = j0 + c, m = m0 + r;")
		g.line("if (m >= M) continue;")
	} else { // a tile of whole heads, some of which this rope may not rotate (or past N)
		hd := o.int("head_dim")
		half, out = fmt.Sprint(hd/2), fmt.Sprint(hd/2)
		g.open("if (n0 < %d && n0 + BN > %d)", hi, lo)
		g.open("for (int e = threadIdx.x; e < BM * (BN / 2); e += %d)", threads)
		g.line("const int r = e / (BN / 2), j = e %% %d, c = e %% (BN / 2) / %d * %d + j, m = m0 + r;", hd/2, hd/2, hd)
		g.line("if (m >= M || n0 + c - j < %d || n0 + c - j >= %d) continue;", lo, hi)
	}
	g.line("float x = smem[r * (bn + 1) + c], y = smem[r * (bn + 1) + c + %s];", half)
	if err := ropeAngle(g, o, i); err != nil {
		return err
	}
	g.line("tfc_rotate<%t>(x, y, (float)op%d_Pos[(size_t)m * op%d_Pos_ld + a], f);", !o.Flags["per_axis"], i, i)
	col := fmt.Sprintf("n0 - %d + c", lo)
	if lo == 0 {
		col = "n0 + c"
	}
	g.line("%s", store(i, "X", "m", col, "x"))
	g.line("%s", store(i, "X", "m", col+" + "+out, "y"))
	if !last {
		g.line("smem[r * (bn + 1) + c] = x;")
		g.line("smem[r * (bn + 1) + c + %s] = y;", half)
	}
	g.close()
	g.close()
	return nil
}

// checkRope checks a rope's sections against its head size.
func checkRope(k Kernel, i int) error {
	o := k.Ops[i]
	n, sum := o.int("sections"), 0
	if n < 1 {
		return fmt.Errorf("kernel %s: op %d (rope) needs at least one section", k.Name, i)
	}
	for s := 0; s < n; s++ {
		w, ok := o.Ints[fmt.Sprintf("section%d", s)]
		if !ok || w <= 0 {
			return fmt.Errorf("kernel %s: op %d (rope) needs Ints[\"section%d\"] > 0", k.Name, i, s)
		}
		sum += w
	}
	if hd := o.int("head_dim"); hd%2 != 0 || sum != hd/2 {
		return fmt.Errorf("kernel %s: op %d (rope): sections sum to %d pairs but head_dim %d has %d", k.Name, i, sum, hd, hd/2)
	}
	return nil
}

// ropeAngle declares the axis a and inverse frequency f of rotary pair j of op i; the
// frequencies are a table from device.RopeFreqs, so they are the CPU's and the reference's bits.
func ropeAngle(g *gen, o Op, i int) error {
	if _, err := cfloat(o.float("theta")); err != nil {
		return fmt.Errorf("rope theta: %w", err)
	}
	n := o.int("sections")
	sections := make([]int, n)
	for s := range sections {
		sections[s] = o.int(fmt.Sprintf("section%d", s))
	}
	mode := device.RopeSections
	switch {
	case o.Flags["alternating"]:
		mode = device.RopeAlternating
	case o.Flags["per_axis"]:
		mode = device.RopePerAxis
	}
	inv, _, err := device.RopeFreqs(o.int("head_dim"), float32(o.float("theta")), sections, mode)
	if err != nil {
		return err
	}
	lits := make([]string, len(inv))
	for j, f := range inv {
		if lits[j], err = cfloat(float64(f)); err != nil {
			return fmt.Errorf("rope inverse frequency %d: %w", j, err)
		}
	}
	table := fmt.Sprintf("%s_op%d_inv", g.k.Name, i)
	fmt.Fprintf(&g.decls, "__device__ const float %s[%d] = {%s};\n", table, len(inv), strings.Join(lits, ", "))
	axis, bound := fmt.Sprint(n-1), len(inv)-sections[n-1]
	for s := n - 2; s >= 0; s-- {
		axis = fmt.Sprintf("j < %d ? %d : %s", bound, s, axis)
		bound -= sections[s]
	}
	g.line("const int a = %s;", axis)
	g.line("const float f = %s[j];", table)
	return nil
}

// rowNorm: one block a row; pointwise ops before the norm form the row, ops after it use it.
type rowNorm struct {
	k    Kernel
	norm int
	d    int
}

func newRowNorm(k Kernel, norm int) (template, error) {
	d := k.Ops[norm].int("D")
	if err := checkPointwise(k, 0, norm, d); err != nil {
		return nil, err
	}
	if err := checkPointwise(k, norm+1, len(k.Ops), d); err != nil {
		return nil, err
	}
	return &rowNorm{k: k, norm: norm, d: d}, nil
}

func (f *rowNorm) tile() string { return fmt.Sprintf("a row of %d a block", f.d) }

func (f *rowNorm) launches() []device.Launch {
	return []device.Launch{{Symbol: f.k.Name, Threads: threads, RowsPerBlock: 1, GridY: 1}}
}

func (f *rowNorm) mutations() []Mutation {
	return []Mutation{OffByOneBound, DroppedScale, WrongStride, MissingBarrier}
}

func (f *rowNorm) body(g *gen) error {
	o, j := g.k.Ops[f.norm], f.norm
	eps, err := cfloat(o.float("eps"))
	if err != nil {
		return fmt.Errorf("kernel %s: eps: %w", g.k.Name, err)
	}
	g.line("constexpr int D = %d;", f.d)
	g.line("__shared__ float row[D];")
	g.line("__shared__ float red[%d];", threads/32)
	g.line("const int m = blockIdx.x;")
	g.line("if (m >= M) return;")
	g.open("for (int c = threadIdx.x; c < D; c += %d)", threads)
	first := g.k.Ops[0]
	field := "X"
	if f.norm > 0 {
		field = firstInput(first.Kind)
	}
	g.line("float v = tfc_ld(%s);", atMut(0, field, "m", "c"))
	for i := 0; i < f.norm; i++ {
		g.pointwiseStep(i, "m", "c")
	}
	if o.Kind == "rmsnorm" && o.Flags["has_res"] {
		g.line("v = tfc_rnd(v + %s);", load(j, "Res", "m", "c"))
		g.line("%s", store(j, "Sum", "m", "c", "v"))
	}
	g.line("row[c] = v;")
	g.close()
	g.line("float part = 0.f;")
	wt := fmt.Sprintf("tfc_scale<MUT>(tfc_ld(op%d_W + c))", j)
	if o.Kind == "rmsnorm" {
		g.line("for (int c = threadIdx.x; c < tfc_bound<MUT>(D); c += %d) part = fmaf(row[c], row[c], part);", threads)
		g.line("const float inv = rsqrtf(tfc_block_sum<%d, MUT>(part, red) / D + %s);", threads, eps)
		g.open("for (int c = threadIdx.x; c < D; c += %d)", threads)
		g.line("float v = tfc_rnd(tfc_rnd(row[c] * inv) * %s);", wt)
	} else {
		g.line("for (int c = threadIdx.x; c < tfc_bound<MUT>(D); c += %d) part += row[c];", threads)
		g.line("const float mean = tfc_block_sum<%d, MUT>(part, red) / D;", threads)
		g.line("part = 0.f;")
		g.open("for (int c = threadIdx.x; c < tfc_bound<MUT>(D); c += %d)", threads)
		g.line("const float x = row[c] - mean;")
		g.line("part = fmaf(x, x, part);")
		g.close()
		g.line("const float inv = rsqrtf(tfc_block_sum<%d, MUT>(part, red) / D + %s);", threads, eps)
		g.open("for (int c = threadIdx.x; c < D; c += %d)", threads)
		g.line("float v = (row[c] - mean) * inv * %s;", wt)
		if o.Flags["has_bias"] {
			g.line("v += tfc_ld(op%d_B + c);", j)
		}
		g.line("v = tfc_rnd(v);")
	}
	if !o.Flags["internal"] {
		g.line("%s", store(j, "Y", "m", "c", "v"))
	}
	for i := f.norm + 1; i < len(g.k.Ops); i++ {
		g.pointwiseStep(i, "m", "c")
	}
	g.close()
	return nil
}

// pointwise: a chain of elementwise ops, one thread an element.
type pointwise struct {
	k Kernel
	n int
}

func newPointwise(k Kernel) (template, error) {
	n := k.Ops[0].int("N")
	if err := checkPointwise(k, 0, len(k.Ops), n); err != nil {
		return nil, err
	}
	return &pointwise{k: k, n: n}, nil
}

func (f *pointwise) tile() string { return fmt.Sprintf("%d columns of a row a block", threads) }

func (f *pointwise) launches() []device.Launch {
	return []device.Launch{{Symbol: f.k.Name, Threads: threads, RowsPerBlock: 1, GridY: ceilDiv(f.n, threads)}}
}

func (f *pointwise) mutations() []Mutation { return []Mutation{OffByOneBound, WrongStride} }

func (f *pointwise) body(g *gen) error {
	g.line("constexpr int N = %d;", f.n)
	g.line("const int m = blockIdx.x, c = blockIdx.y * %d + threadIdx.x;", threads)
	g.line("if (m >= M || c >= tfc_bound<MUT>(N)) return;")
	g.line("float v = tfc_ld(%s);", atMut(0, firstInput(g.k.Ops[0].Kind), "m", "c"))
	for i := range g.k.Ops {
		g.pointwiseStep(i, "m", "c")
	}
	return nil
}

// rope: in place, one block a row, one thread a rotary pair.
type rope struct{ k Kernel }

func newRope(k Kernel) (template, error) {
	if err := checkRope(k, 0); err != nil {
		return nil, err
	}
	return &rope{k: k}, nil
}

func (f *rope) tile() string { return "a row a block" }

func (f *rope) launches() []device.Launch {
	return []device.Launch{{Symbol: f.k.Name, Threads: threads, RowsPerBlock: 1, GridY: 1}}
}

func (f *rope) mutations() []Mutation { return []Mutation{OffByOneBound, WrongStride} }

func (f *rope) body(g *gen) error {
	o := g.k.Ops[0]
	g.line("constexpr int HD = %d, HALF = HD / 2, PAIRS = %d * HALF;", o.int("head_dim"), o.int("heads"))
	g.line("const int m = blockIdx.x;")
	g.line("if (m >= M) return;")
	g.open("for (int e = threadIdx.x; e < tfc_bound<MUT>(PAIRS); e += %d)", threads)
	g.line("const int h = e / HALF, j = e %% HALF;")
	g.line("%s* p = %s;", mustCType(o, "X"), atMut(0, "X", "m", "h * HD"))
	g.line("float x = tfc_ld(p + j), y = tfc_ld(p + j + HALF);")
	if err := ropeAngle(g, o, 0); err != nil {
		return err
	}
	g.line("tfc_rotate<%t>(x, y, (float)op0_Pos[(size_t)m * op0_Pos_ld + a], f);", !o.Flags["per_axis"])
	g.line("tfc_st(p + j, x);")
	g.line("tfc_st(p + j + HALF, y);")
	g.close()
	return nil
}

func mustCType(o Op, field string) string {
	for _, x := range operandsOf(o.Kind) {
		if x.Path == field {
			t, _ := o.ctype(x)
			return t
		}
	}
	panic("hip: no operand " + field + " in " + o.Kind)
}

// attention: full over spans (groups of rows of one span), or causal over a paged cache.
type attention struct {
	k      Kernel
	groups int // query rows a block takes, over spans
}

const keyTile = 32

// keySplit is how many blocks (a cluster on CUDA) share a cached attention's row and head in
// launches of at most smallRows rows; a row's keys are cut into keySplit ranges a warp.
const keySplit = 8

// spanRows is the query rows a block of an uncached attention takes (tfc_attention_spans' QG):
// under CUDA 8 warps of 16 rows on the tensor cores, elsewhere 16 sub-groups of 8. The launch
// rule is the same for every target (gpu.Geometry).
const spanRows = 128

func newAttention(k Kernel) (template, error) {
	o := k.Ops[0]
	h, kv, hd := o.int("heads"), o.int("kv_heads"), o.int("head_dim")
	if kv <= 0 || h%kv != 0 {
		return nil, fmt.Errorf("kernel %s: attention heads %d are not a multiple of kv_heads %d", k.Name, h, kv)
	}
	if hd <= 0 {
		return nil, fmt.Errorf("kernel %s: attention head_dim must be positive", k.Name)
	}
	if o.Flags["cache"] {
		if o.int("page_size") <= 0 {
			return nil, fmt.Errorf("kernel %s: a cached attention needs Ints[\"page_size\"] > 0", k.Name)
		}
		if mustCType(o, "Cache.K") != mustCType(o, "Cache.V") {
			return nil, fmt.Errorf("kernel %s: Cache.K and Cache.V must have the same dtype", k.Name)
		}
	}
	return &attention{k: k, groups: spanRows}, nil
}

func (f *attention) tile() string {
	if f.k.Ops[0].Flags["cache"] {
		return fmt.Sprintf("store K and V a row a block; then a query row's head a block, its keys cut into %d ranges by position (at most %d rows: a cluster of %d blocks a row's head)", keySplit*threads/32, smallRows, keySplit)
	}
	return fmt.Sprintf("%d query rows of a span by a head a block, keys in tiles of %d", f.groups, keyTile)
}

func (f *attention) launches() []device.Launch {
	o := f.k.Ops[0]
	if !o.Flags["cache"] {
		return []device.Launch{{Symbol: f.k.Name, Threads: threads, RowsPerBlock: f.groups, PlusSpans: true, GridY: o.int("heads")}}
	}
	h, kv, mma := o.int("heads"), o.int("kv_heads"), 0
	if (o.int("head_dim")+15)/16*16 <= 128 { // the tensor-core kernel's own grid: a block a row and pagedHeads query heads
		mma = h / pagedHeads(h/kv)
	}
	return []device.Launch{
		{Symbol: f.k.Name + "_kvstore", Threads: threads, RowsPerBlock: 1, GridY: 1},
		// a block a row and query head; at few rows a cluster of keySplit
		{Symbol: f.k.Name, Threads: threads, RowsPerBlock: 1, GridY: h, PagedMMAGridY: mma,
			SmallRows: smallRows, SmallRowsGridY: h * keySplit, SmallSymbol: f.k.Name + smallSuffix, SmallClusterY: keySplit},
	}
}

func (f *attention) mutations() []Mutation {
	return []Mutation{OffByOneBound, DroppedScale, WrongStride, MissingBarrier}
}

// pagedHeads is the query heads a block of the tensor-core cached attention takes: the largest
// divisor of qg (the query heads a KV head serves) not above a block's warps, as tfc_paged_heads
// in kernels/tfc_attention.h.
func pagedHeads(qg int) int {
	k := min(qg, threads/32)
	for qg%k != 0 {
		k--
	}
	return k
}

func (f *attention) body(g *gen) error {
	o := g.k.Ops[0]
	scale, err := cfloat(o.float("scale"))
	if err != nil {
		return fmt.Errorf("kernel %s: scale: %w", g.k.Name, err)
	}
	h, kv, hd := o.int("heads"), o.int("kv_heads"), o.int("head_dim")
	if !o.Flags["cache"] {
		g.line("tfc_attention_spans<%d, %d, %d, %d, MUT>(op0_Q, op0_Q_ld, op0_K, op0_K_ld, op0_V, op0_V_ld, op0_Y, op0_Y_ld,", hd, f.groups, keyTile, threads)
		g.line("    op0_Spans, S, %d, %d, %s);", h, kv, scale)
		return nil
	}
	ps := o.int("page_size")
	g.line("tfc_attention_paged<%d, %d, %d, %d, %d, %d, small, MUT>(op0_Q, op0_Q_ld, op0_Cache_K, op0_Cache_K_ld, op0_Cache_V, op0_Cache_V_ld,", hd, h/kv, keyTile, threads, ps, keySplit)
	g.line("    op0_Y, op0_Y_ld, op0_Rows_RowSeq, op0_Rows_RowPos, op0_Rows_PageTable, op0_Rows_PageTable_ld, M, %s);", scale)
	g.pre = map[string]string{g.k.Name + "_kvstore": fmt.Sprintf(
		"  tfc_kv_store<%d, %d, %d>(op0_K, op0_K_ld, op0_V, op0_V_ld, op0_Cache_K, op0_Cache_K_ld, op0_Cache_V, op0_Cache_V_ld,\n"+
			"      op0_Rows_RowSeq, op0_Rows_RowPos, op0_Rows_PageTable, op0_Rows_PageTable_ld, M);\n", kv*hd, ps, threads)}
	return nil
}

// rowCopy: embed, gather and scatter, one block a row.
type rowCopy struct{ k Kernel }

func newRowCopy(k Kernel) (template, error) { return &rowCopy{k: k}, nil }

func (f *rowCopy) tile() string { return "a row a block" }

func (f *rowCopy) launches() []device.Launch {
	return []device.Launch{{Symbol: f.k.Name, Threads: threads, RowsPerBlock: 1, GridY: 1}}
}

func (f *rowCopy) mutations() []Mutation { return []Mutation{OffByOneBound, WrongStride} }

func (f *rowCopy) body(g *gen) error {
	o := g.k.Ops[0]
	g.line("constexpr int D = %d;", o.int("D"))
	g.line("const int m = blockIdx.x;")
	g.line("if (m >= M) return;")
	loop := fmt.Sprintf("for (int c = threadIdx.x; c < tfc_bound<MUT>(D); c += %d)", threads)
	switch o.Kind {
	case "embed":
		g.line("const int id = op0_Ids[m];")
		g.line("if (id < 0 || id >= %d) tfc_trap();", o.int("V"))
		g.line("%s %s", loop, store(0, "Y", "m", "c", "tfc_ld("+atMut(0, "Table", "id", "c")+")"))
	case "gather":
		g.line("const int i = op0_Index[m];")
		g.line("if (i < 0) tfc_trap();")
		g.line("%s %s", loop, store(0, "Y", "m", "c", "tfc_ld("+atMut(0, "X", "i", "c")+")"))
	case "scatter":
		g.line("const int i = op0_Index[m];")
		g.line("if (i < 0) tfc_trap();")
		g.line("%s %s", loop, store(0, "Y", "i", "c", "tfc_ld("+atMut(0, "Src", "m", "c")+")"))
	}
	return nil
}

// argmax: one block a row, each row's greedy pick (tfc_block_argmax) stored at its column of Y.
type argmax struct{ k Kernel }

func newArgmax(k Kernel) (template, error) {
	if d := k.Ops[0].DTypes["X"]; d != "" && d != "F32" {
		return nil, fmt.Errorf("kernel %s: argmax reads F32 logits, not %s", k.Name, d)
	}
	return &argmax{k: k}, nil
}

func (f *argmax) tile() string { return "a row a block" }

func (f *argmax) launches() []device.Launch {
	return []device.Launch{{Symbol: f.k.Name, Threads: threads, RowsPerBlock: 1, GridY: 1}}
}

func (f *argmax) mutations() []Mutation {
	return []Mutation{OffByOneBound, WrongStride, MissingBarrier}
}

func (f *argmax) body(g *gen) error {
	g.line("constexpr int V = %d;", g.k.Ops[0].int("V"))
	g.line("__shared__ float bv[%d];", threads)
	g.line("__shared__ int bi[%d];", threads)
	g.line("const int m = blockIdx.x;")
	g.line("if (m >= M) return;")
	g.line("tfc_block_argmax<%d, MUT>(%s, V, %s, bv, bi);", threads, atMut(0, "X", "m", "0"), at(0, "Y", "0", "m"))
	return nil
}
