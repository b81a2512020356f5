package ir

import "sort"

// Op names an operation of the closed catalog.
type Op string

const (
	OpLinear       Op = "linear"       // x·Wᵀ (+ bias)
	OpRMSNorm      Op = "rmsnorm"      // x / sqrt(mean(x²) + eps) * weight
	OpLayerNorm    Op = "layernorm"    // (x - mean) / sqrt(var + eps) * weight + bias
	OpRope         Op = "rope"         // rotary embedding of each head, rotate-half layout
	OpAttention    Op = "attention"    // softmax(q·kᵀ·scale)·v over spans, or causal over a KV cache
	OpAdd          Op = "add"          // a + b
	OpMul          Op = "mul"          // a * b
	OpSiLU         Op = "silu"         // x * sigmoid(x)
	OpGELU         Op = "gelu"         // exact GELU (erf)
	OpGELUTanh     Op = "gelu_tanh"    // GELU, tanh approximation
	OpQuickGELU    Op = "quick_gelu"   // x * sigmoid(1.702 x)
	OpSwiGLU       Op = "swiglu"       // silu(gate) * up
	OpEmbed        Op = "embed"        // table rows by id
	OpScatter      Op = "scatter"      // x with rows index[i] replaced by src[i]
	OpGather       Op = "gather"       // rows index[i] of x
	OpSplit        Op = "split"        // equal column slices (views)
	OpMerge        Op = "merge"        // factor consecutive rows joined into one (a view)
	OpUnmerge      Op = "unmerge"      // each row cut into factor consecutive rows (a view)
	OpFlatten      Op = "flatten"      // a weight seen as [d0, d1*d2*…] (a view)
	OpUnfold       Op = "unfold"       // a weight's columns from channel-major to merge order (permuted when loaded)
	OpDeinterleave Op = "deinterleave" // a weight's rows in each head from adjacent rotary pairs to halves (permuted when loaded)
	OpSelect       Op = "select"       // cond ? a : b over weights, fixed at bind time, or over spans by layer
	OpLoop         Op = "loop"         // for i < n { … }; see Loop
)

// ArgSpec describes one operand role of an op.
type ArgSpec struct {
	Role     string
	Kinds    []Kind // accepted kinds; WeightView also accepts a declared weight
	DType    DType  // required element type; 0 accepts F32 or Stored
	Optional bool
	Doc      string
	Field    string // the device op's field it becomes (package catalog); "" for a view's operand
}

// AttrSpec describes one attribute of an op.
type AttrSpec struct {
	Name     string
	Kind     AttrKind
	Required bool
	Inferred bool     // computed by the checker; writing it is allowed and then checked
	Enum     []string // AttrEnum: the accepted words, the first is the default
	Default  string   // the default as written in the docs, when not Required
	Doc      string
	Field    string // the device op's field it becomes; "" when only the checker reads it
	Sparse   bool   // AttrEnum: left out of the device op unless written (its first word is the field's zero value)
}

// OpSpec is a catalog entry of the language: operands, attributes, the doc line and the device op
// (package catalog) it lowers to; shape and dtype rules live in package check and
// docs/graph-language.md. A view (split, merge, unmerge, flatten, unfold, deinterleave, select) lowers to no device op.
type OpSpec struct {
	Op      Op
	Args    []ArgSpec
	Attrs   []AttrSpec
	Doc     string
	Device  string // the device op it lowers to; "" for a view
	Act     string // the device op's activation (activate, glu)
	InPlace string // the operand role the op overwrites (its output takes that buffer)
}

// Attr finds an attribute spec.
func (s *OpSpec) Attr(name string) *AttrSpec {
	for i := range s.Attrs {
		if s.Attrs[i].Name == name {
			return &s.Attrs[i]
		}
	}
	return nil
}

// ArgSpec finds an operand spec by role.
func (s *OpSpec) ArgSpec(role string) *ArgSpec {
	for i := range s.Args {
		if s.Args[i].Role == role {
			return &s.Args[i]
		}
	}
	return nil
}

var (
	tensor = []Kind{Tensor}
	weight = []Kind{WeightView}
)

func activation(op Op, doc string) *OpSpec {
	return &OpSpec{Op: op, Doc: doc, Device: "activate", Act: string(op), Args: []ArgSpec{{Role: "x", Kinds: tensor, DType: F32, Field: "X"}}}
}

func binary(op Op, doc string) *OpSpec {
	return &OpSpec{Op: op, Doc: doc, Device: string(op), Args: []ArgSpec{
		{Role: "a", Kinds: tensor, DType: F32, Field: "A"}, {Role: "b", Kinds: tensor, DType: F32, Field: "B"}}}
}

var catalog = map[Op]*OpSpec{
	OpLinear: {Op: OpLinear, Device: "linear", Doc: "x·Wᵀ + bias over the last dimension", Args: []ArgSpec{
		{Role: "x", Kinds: tensor, DType: F32, Field: "X"},
		{Role: "weight", Kinds: weight, Field: "W"},
		{Role: "bias", Kinds: weight, Optional: true, Field: "B"}},
		Attrs: []AttrSpec{{Name: "round", Kind: AttrEnum, Enum: []string{"sum", "product"}, Default: "sum", Field: "Round", Sparse: true,
			Doc: "where BF16 precision rounds: sum rounds x·Wᵀ + bias once (torch's linear); product rounds x·Wᵀ, then adds the bias and rounds again (torch's BF16 convolution)"}}},
	OpRMSNorm: {Op: OpRMSNorm, Device: "rmsnorm", Doc: "root-mean-square norm of each row, scaled by weight", Args: []ArgSpec{
		{Role: "x", Kinds: tensor, DType: F32, Field: "X"},
		{Role: "weight", Kinds: weight, Field: "W"}},
		Attrs: []AttrSpec{{Name: "eps", Kind: AttrFloat, Required: true, Doc: "added to the mean square", Field: "Eps"}}},
	OpLayerNorm: {Op: OpLayerNorm, Device: "layernorm", Doc: "layer norm of each row (biased variance), scaled and shifted", Args: []ArgSpec{
		{Role: "x", Kinds: tensor, DType: F32, Field: "X"},
		{Role: "weight", Kinds: weight, Field: "W"},
		{Role: "bias", Kinds: weight, Field: "B"}},
		Attrs: []AttrSpec{{Name: "eps", Kind: AttrFloat, Required: true, Doc: "added to the variance", Field: "Eps"}}},
	OpRope: {Op: OpRope, Device: "rope", InPlace: "x", Doc: "rotary embedding of every head by its row's positions", Args: []ArgSpec{
		{Role: "x", Kinds: tensor, DType: F32, Field: "X"},
		{Role: "pos", Kinds: tensor, DType: I32, Field: "Pos"}},
		Attrs: []AttrSpec{
			{Name: "heads", Kind: AttrInt, Required: true, Doc: "heads in a row of x", Field: "Heads"},
			{Name: "head_dim", Kind: AttrInt, Inferred: true, Doc: "last dim of x / heads", Field: "HeadDim"},
			{Name: "theta", Kind: AttrFloat, Required: true, Doc: "frequency base", Field: "Theta"},
			{Name: "sections", Kind: AttrInts, Required: true, Doc: "rotary pairs per position axis; they sum to head_dim/2", Field: "Sections"},
			{Name: "mode", Kind: AttrEnum, Enum: []string{"sections", "per_axis", "alternating"}, Default: "sections", Field: "Mode",
				Doc: "sections: frequency by pair index over the whole head (M-RoPE); per_axis: frequency restarts in each section (2-D vision rope); alternating: the axes take turns over the head's frequencies (Pixtral's 2-D rope; equal sections)"}}},
	OpAttention: {Op: OpAttention, Device: "attention", Doc: "scaled dot-product attention per head, full within spans or causal over a KV cache", Args: []ArgSpec{
		{Role: "q", Kinds: tensor, DType: F32, Field: "Q"},
		{Role: "k", Kinds: tensor, DType: F32, Field: "K"},
		{Role: "v", Kinds: tensor, DType: F32, Field: "V"},
		{Role: "spans", Kinds: []Kind{Spans}, Optional: true, Doc: "full attention within each span; excludes cache", Field: "Spans"},
		{Role: "cache", Kinds: []Kind{KVCache}, Optional: true, Doc: "one layer of a KV cache, cache[i]; needs rows", Field: "Cache"},
		{Role: "rows", Kinds: []Kind{Rows}, Optional: true, Doc: "each row's sequence and cache position", Field: "Rows"}},
		Attrs: []AttrSpec{
			{Name: "heads", Kind: AttrInt, Required: true, Doc: "query heads", Field: "Heads"},
			{Name: "kv_heads", Kind: AttrInt, Default: "heads", Doc: "key/value heads; divides heads", Field: "KVHeads"},
			{Name: "head_dim", Kind: AttrInt, Inferred: true, Doc: "last dim of q / heads", Field: "HeadDim"},
			{Name: "scale", Kind: AttrFloat, Default: "1/sqrt(head_dim)", Doc: "multiplies q·kᵀ", Field: "Scale"}}},
	OpAdd:       binary(OpAdd, "elementwise sum; `a + b`"),
	OpMul:       binary(OpMul, "elementwise product; `a * b`"),
	OpSiLU:      activation(OpSiLU, "x * sigmoid(x)"),
	OpGELU:      activation(OpGELU, "0.5 x (1 + erf(x/√2))"),
	OpGELUTanh:  activation(OpGELUTanh, "GELU, tanh approximation"),
	OpQuickGELU: activation(OpQuickGELU, "x * sigmoid(1.702 x)"),
	OpSwiGLU: {Op: OpSwiGLU, Device: "glu", Act: "silu", Doc: "silu(gate) * up", Args: []ArgSpec{
		{Role: "gate", Kinds: tensor, DType: F32, Field: "Gate"}, {Role: "up", Kinds: tensor, DType: F32, Field: "Up"}}},
	OpEmbed: {Op: OpEmbed, Device: "embed", Doc: "row ids[r] of table", Args: []ArgSpec{
		{Role: "ids", Kinds: tensor, DType: I32, Field: "Ids"}, {Role: "table", Kinds: weight, Field: "Table"}}},
	OpScatter: {Op: OpScatter, Device: "scatter", InPlace: "x", Doc: "x with row index[i] replaced by row i of src", Args: []ArgSpec{
		{Role: "x", Kinds: tensor, DType: F32, Field: "Y"},
		{Role: "src", Kinds: tensor, DType: F32, Field: "Src"},
		{Role: "index", Kinds: tensor, DType: I32, Field: "Index"}}},
	OpGather: {Op: OpGather, Device: "gather", Doc: "row index[i] of x", Args: []ArgSpec{
		{Role: "x", Kinds: tensor, DType: F32, Field: "X"}, {Role: "index", Kinds: tensor, DType: I32, Field: "Index"}}},
	OpSplit: {Op: OpSplit, Doc: "equal column slices of x, as views; one output a part", Args: []ArgSpec{
		{Role: "x", Kinds: tensor, DType: F32}},
		Attrs: []AttrSpec{{Name: "parts", Kind: AttrInt, Required: true, Doc: "number of slices; a constant that divides the last dim"}}},
	OpMerge: {Op: OpMerge, Doc: "factor consecutive rows joined into one row, as a view", Args: []ArgSpec{
		{Role: "x", Kinds: tensor, DType: F32}},
		Attrs: []AttrSpec{{Name: "factor", Kind: AttrInt, Required: true, Doc: "rows joined; divides the row count"}}},
	OpUnmerge: {Op: OpUnmerge, Doc: "each row cut into factor consecutive rows, as a view (per-head work on [R, H*HD] as [R*H, HD])", Args: []ArgSpec{
		{Role: "x", Kinds: tensor, DType: F32}},
		Attrs: []AttrSpec{{Name: "factor", Kind: AttrInt, Required: true, Doc: "rows a row becomes; divides the width"}}},
	OpFlatten: {Op: OpFlatten, Doc: "a weight [d0, d1, …] seen as [d0, d1*…], as a view", Args: []ArgSpec{
		{Role: "weight", Kinds: weight}}},
	OpUnfold: {Op: OpUnfold, Doc: "a weight [O, C*f] whose column c*f + k (torch unfold's order) is read as column k*C + c (merge's order); permuted when loaded", Args: []ArgSpec{
		{Role: "weight", Kinds: weight}},
		Attrs: []AttrSpec{{Name: "factor", Kind: AttrInt, Required: true, Doc: "rows merge joined; divides the width"}}},
	OpDeinterleave: {Op: OpDeinterleave, Doc: "a weight [heads*HD, …] or bias [heads*HD] whose rows 2j and 2j+1 of each head (rotary on adjacent pairs, GPT-J's layout) are read as rows j and HD/2 + j (rope's halves); permuted when loaded", Args: []ArgSpec{
		{Role: "weight", Kinds: weight}},
		Attrs: []AttrSpec{{Name: "heads", Kind: AttrInt, Required: true, Doc: "heads in the rows; each head's rows are even in number"}}},
	OpSelect: {Op: OpSelect, Doc: "cond ? a : b over weights, decided when the config is bound, or over spans by a layer index (i in list)", Args: []ArgSpec{
		{Role: "a", Kinds: weight}, {Role: "b", Kinds: weight}},
		Attrs: []AttrSpec{{Name: "cond", Kind: AttrBool, Required: true, Doc: "a bool config value, possibly negated; or i in list, a loop index in an int list config value"}}},
}

// Spec returns the catalog entry of op, or nil for an unknown op and for OpLoop.
func Spec(op Op) *OpSpec { return catalog[op] }

// Ops lists the catalog's ops by name.
func Ops() []Op {
	out := make([]Op, 0, len(catalog))
	for op := range catalog {
		out = append(out, op)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
