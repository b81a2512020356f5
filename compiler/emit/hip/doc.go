// Package hip renders a family's kernels as HIP source: the text of kernels/gen/<family>.hip.
//
// The lowering hands Render a list of Kernels. A Kernel is one launch: a short list of catalog
// ops (runtime/device, named as OpName returns) whose constants are baked in. The first op is the
// producer; the ops after it are epilogues fused into it, and they form a chain: each later op's
// first input operand is the previous op's output. Rope's X is the Y of the last op before it that
// is not a rope, or the column slice of that Y starting at Ints["col"] (so one linear can feed a
// rope of q and a rope of k). An op's output is stored unless Flags["internal"] says that only
// later ops of the same kernel read it.
//
// Kernels supported, by the op they are built around:
//
//	linear                 tiled GEMM (LDS tiles, F32 accumulation over K in order; tiles of at
//	                       most 8 rows split K across threads in the same order, and a linear
//	                       launched on at most 8 rows takes 16-column tiles: a rope linear's hold
//	                       8 rotary pairs of a head, and whole heads where head_dim is not a
//	                       multiple of 16), then its own
//	                       bias, activation and residual epilogue, then rope, add, mul, activate,
//	                       glu, copy. Under CUDA a vision kernel's linear (Kernel.Role "vision",
//	                       F32 X, BF16 W) computes the same tiles on tensor cores instead
//	                       (tfc_gemm_mma: X split exactly into three BF16 terms, mma.sync with
//	                       F32 accumulation), one path at every M and the same grid; the
//	                       decoder's linears, whose launches mix decode and prompt rows, and every
//	                       AMD build keep the scalar tiles
//	rmsnorm, layernorm     one block a row; add, mul, activate, glu, copy before it (forming the
//	                       row) and after it; rmsnorm with has_res also stores x+Res to Sum
//	add mul activate glu copy  elementwise chains
//	rope                   in place, alone
//	attention              alone: full over spans, or causal over a paged KV cache
//	embed gather scatter   row copies, alone
//	argmax                 alone, a block a row: the row's first largest value's column
//
// # Constants each op needs
//
// The op catalog's Consts (runtime/device/catalog): a linear's N and K, a norm's D and eps, the
// pointwise ops' N, embed's D and V, gather's and scatter's D, argmax's V, rope's heads, head_dim and theta,
// attention's heads, kv_heads, head_dim and scale; the flags of its optional tensors (has_bias,
// has_res); and what one template reads alone: rope's sections, section0..section{sections-1},
// col (in a linear kernel) per_axis and alternating, attention's cache and page_size.
//
// DTypes maps an operand field to "F32", "BF16" or "F16" (absent means F32); index operands
// (Ids, Index, Pos, Spans, Rows.*) are always I32.
//
// # Parameters
//
// A kernel's parameter list follows one rule, which the GPU backends use to marshal arguments:
// for each op in order, for each of its Tensor operands in the field order of its struct in
// runtime/device (Attention's Cache.K, Cache.V, then Rows.RowSeq, Rows.RowPos, Rows.PageTable
// follow Spans), if the operand is present, two parameters: a pointer to the tensor's first
// element (buffer base plus Off elements) and its row stride in elements (int). Optional operands
// are present as their flags say (Linear B: has_bias, Res: has_res; RMSNorm Res and Sum: has_res;
// LayerNorm B: has_bias; Attention Spans without cache, Cache and Rows with it). Every operand is
// passed even when the fused kernel does not read it. Then the runtime sizes: int M, the rows
// the launch covers (the Rows of the first op's X for linear, norms and rope, Q for attention,
// Src for scatter, Y otherwise), and for attention over spans int S, the number of spans
// (Spans.Cols - 1). Params returns this list; Launches gives the grid of each launch.
//
// A kernel's grid is (ceil(M/RowsPerBlock), GridY) blocks of 256 threads, with S more in x for
// attention over spans, and (1, SmallRowsGridY) instead when that is set and M is at most 8
// ((M, SmallRowsGridY) for a cached attention, a block a row). A decoder's linears other than
// the gate/up GEMM launch <name>_mid at 8 < M ≤ 64, on tiles of 16 rows: (ceil(M/16), GridY).
//
// A cached attention kernel is two launches with the same arguments: <name>_kvstore, which stores
// the launch's K and V rows into the cache (a block a row), then <name>, a block a row and query
// head, or at M ≤ 8 <name>_rows, 8 blocks a row and query head (a cluster on CUDA, which shares
// the row's key ranges out between them; the same bits).
//
// # Planted controls
//
// Render can plant one mutation in one named kernel (Mutate): every kernel declares
// `constexpr int MUT`, and the templates in kernels/tfc_kernels.h read it. A mutant differs from
// the real kernel in that one line; the missing-barrier mutant of an attention also holds back
// every wave but the first before its LDS fill, so that the race it plants shows on every launch.
package hip
