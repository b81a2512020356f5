package device

// Op is one operation of the closed catalog. Operands are Tensors; attributes are plain fields.
// An output may alias an input exactly (same buffer, offset and shape) where an op says so:
// elementwise ops, Rope, Linear's Res, and the norms' X, Res and Sum. Any other overlap of an
// output with an operand is a compiler error; backends need not handle it.
type Op interface{ OpName() string }

// Act is an activation applied in an epilogue or by itself.
type Act uint8

const (
	ActNone      Act = iota
	ActSiLU          // x * sigmoid(x)
	ActGELU          // exact: 0.5 x (1 + erf(x/√2))
	ActGELUTanh      // tanh approximation
	ActQuickGELU     // x * sigmoid(1.702 x)
)

func (a Act) String() string {
	return [...]string{"none", "silu", "gelu", "gelu_tanh", "quick_gelu"}[a]
}

// Linear: Y = act(X·Wᵀ + B) + Res. X [M,K], W [N,K] (F32, BF16 or F16), B [1,N] optional,
// Res [M,N] optional (added after the activation), Y [M,N]. Y may alias Res.
type Linear struct {
	X, W, B, Res, Y Tensor
	Act             Act
}

// RMSNorm: Y = x / sqrt(mean(x²) + Eps) * W, per row. X, Y [M,D], W [1,D].
// With Res present, x = X + Res is formed first and also stored to Sum (the residual stream).
type RMSNorm struct {
	X, Res, Sum, W, Y Tensor
	Eps               float32
}

// LayerNorm: Y = (x - mean) / sqrt(var + Eps) * W + B, per row; var is the biased variance.
type LayerNorm struct {
	X, W, B, Y Tensor
	Eps        float32
}

// RopeMode says how a rope op picks each rotary pair's frequency and position axis.
type RopeMode uint8

const (
	// RopeSections: pair j of HeadDim/2 takes axis a where Sections partition the pairs in axis
	// order, and frequency Theta^(-2j/HeadDim) (M-RoPE; one section is plain 1-D RoPE).
	RopeSections RopeMode = iota
	// RopePerAxis: as RopeSections, but the frequency index restarts in each section:
	// pair j' of section s has frequency Theta^(-j'/Sections[s]) (2-D vision RoPE).
	RopePerAxis
)

// Rope rotates each head of X in place by the angles of its row's positions, in the
// rotate-half layout: for pair j, (x[j], x[j+HeadDim/2]) → (x·cos − y·sin, y·cos + x·sin).
// X [R, Heads*HeadDim] (may be a column slice), Pos [R, len(Sections)] I32. As transformers does,
// even in a float64 model, inv_freq = 1/Theta^e and the angle pos·inv_freq are float32 values.
type Rope struct {
	X, Pos   Tensor
	Heads    int
	HeadDim  int
	Theta    float32
	Sections []int
	Mode     RopeMode
}

// Attention writes softmax(Q·Kᵀ·Scale)·V per head into Y. Q [R, Heads*HeadDim], K and V
// [R, KVHeads*HeadDim] (column slices allowed); query head h reads KV head h/(Heads/KVHeads).
//
// Without a cache (Cache nil), Spans [1, S+1] I32 holds cumulative row offsets from 0 to R: a row attends to
// every row of its own span (full, non-causal). With a cache, K and V rows are first stored at
// their row's (sequence, position) and each row then attends causally to positions 0..pos of
// its own sequence.
type Attention struct {
	Q, K, V, Y Tensor
	Heads      int
	KVHeads    int
	HeadDim    int
	Scale      float32
	Spans      Tensor
	Cache      *KVCache
	Rows       *Rows
}

// KVCache is one layer's paged key and value store: [Pages*PageSize, KVHeads*HeadDim] each, K and
// V of one shape; stored rows round to the cache's dtype. Every page a row reads must be mapped.
type KVCache struct {
	K, V Tensor
}

// Rows describes the rows of one forward round: RowSeq and RowPos [1,R] I32 give each row's
// sequence slot and cache position; PageTable [Seqs, MaxPages] I32 maps a slot's page index to a
// cache page of PageSize rows.
type Rows struct {
	RowSeq, RowPos, PageTable Tensor
	PageSize                  int
}

// Add: Y = A + B, elementwise over equal shapes.
type Add struct{ A, B, Y Tensor }

// Mul: Y = A * B, elementwise over equal shapes.
type Mul struct{ A, B, Y Tensor }

// Activate: Y = act(X).
type Activate struct {
	X, Y Tensor
	Act  Act
}

// GLU: Y = act(Gate) * Up (SwiGLU with ActSiLU). Gate, Up, Y [M,F].
type GLU struct {
	Gate, Up, Y Tensor
	Act         Act
}

// Embed: Y[r] = Table[Ids[r]]. Ids [1,R] I32, Table [V,D], Y [R,D]. An id outside [0,V) is an error.
type Embed struct{ Ids, Table, Y Tensor }

// Scatter: Y[Index[i]] = Src[i] for each row i of Src. Index [1,n] I32.
type Scatter struct{ Src, Index, Y Tensor }

// Gather: Y[i] = X[Index[i]]. Index [1,n] I32.
type Gather struct{ X, Index, Y Tensor }

// Copy: Y = X (shapes equal; strides may differ).
type Copy struct{ X, Y Tensor }

func (Linear) OpName() string    { return "linear" }
func (RMSNorm) OpName() string   { return "rmsnorm" }
func (LayerNorm) OpName() string { return "layernorm" }
func (Rope) OpName() string      { return "rope" }
func (Attention) OpName() string { return "attention" }
func (Add) OpName() string       { return "add" }
func (Mul) OpName() string       { return "mul" }
func (Activate) OpName() string  { return "activate" }
func (GLU) OpName() string       { return "glu" }
func (Embed) OpName() string     { return "embed" }
func (Scatter) OpName() string   { return "scatter" }
func (Gather) OpName() string    { return "gather" }
func (Copy) OpName() string      { return "copy" }
