// Package catalog is the op catalog at the device level, the one table of what each op is: its
// struct (tensors and attributes), each tensor's role, and what the compiler's fusion, the kernel
// emitter and the contract read of it. Package device's op structs, their names and operand
// lists are generated from it (go generate ./runtime/device); package ir keeps the language's
// ops (the graph catalog), each naming the device op it lowers to. Adding an op is a row here,
// its float64 reference (package contracts), its CPU implementation and a kernel template.
package catalog

// Op is one catalog entry.
type Op struct {
	Name    string   // OpName, as the compiler, the schedules and the contract name it
	Type    string   // the struct in package device
	Doc     []string // the struct's doc comment, line by line
	Tensors []Tensor // tensor fields in operand order (the order kernels take them)
	Attrs   []Attr   // the other struct fields
	Class   Class    // how its outputs meet the float64 reference
	Role    Role     // how it takes part in a kernel
	// Epilogues are the ops a kernel this op starts may run after it on its output (Producer).
	Epilogues []string
	Rows      string // the tensor whose row count is the launch's rows
	Scale     string // the field the dropped-scale control neutralises (a float set to 1, a tensor to ones)
	// Consts are the constants a kernel of the op is specialised for, as its template names them.
	Consts []Const
	// Round lists the op's rounding points in BF16 precision, in order: the values rounded to
	// BF16 (nearest, ties to even) where torch's module rounds them under the publisher's BF16
	// run; arithmetic between them is F32. An op without any moves BF16-exact values unchanged.
	Round []Round
}

// Round is one rounding point of an op in BF16 precision.
type Round struct {
	Name string // as the backends and the reference name it (e.g. linear's "out")
	Doc  string // the value rounded, and when the point applies
}

// Rounds names the rounding points of the op called name, in order.
func Rounds(name string) []string {
	o := Find(name)
	if o == nil {
		return nil
	}
	var out []string
	for _, r := range o.Round {
		out = append(out, r.Name)
	}
	return out
}

// Const is one constant of a kernel: a tensor's rows or columns, or an attribute.
type Const struct {
	Name  string // as the template reads it: N, K, D, V, heads, head_dim, eps, theta, scale
	Field string // the tensor or attribute it comes from
	Of    Of
}

// Of says what of its field a constant is.
type Of uint8

const (
	Cols      Of = iota // a tensor's columns
	RowCount            // a tensor's rows
	IntAttr             // an int attribute
	FloatAttr           // a float attribute
)

// Tensor is one tensor field of an op.
type Tensor struct {
	Path      string // field path in the struct; Parent.Field under a pointer field
	In, Out   bool   // read, written (both: rope's X, scatter's Y, the KV cache)
	Index     bool   // holds I32 indices
	WithCache int8   // attention: 1 only with a KV cache, -1 only without, 0 either way
	Flag      string // for an optional tensor, the kernel flag that says it is present
	Per       Per    // how it follows the launch's rows
	Reuse     bool   // the op's output may take over this input's buffer (memory planning)
}

// Per says how a tensor follows the launch's rows: a relaunch over rows [lo,hi) slices it so.
type Per uint8

const (
	Shared  Per = iota // whole in every launch: weights, tables, the cache, spans
	PerRow             // row r belongs to launch row r
	PerCol             // an I32 [1,R] list whose column r belongs to launch row r
	PerSpan            // cumulative row offsets [1,S+1]: a relaunch over whole spans gets its own
)

// Attr is one non-tensor field of an op's struct.
type Attr struct{ Name, Type string }

// Class is an output's precision class against the float64 reference.
type Class uint8

const (
	Exact       Class = iota // data movement: equal to the reference rounded to the output dtype
	Elementwise              // a few float32 roundings per element
	Reduction                // float32 accumulation over K terms
)

// Role says how an op takes part in a kernel.
type Role uint8

const (
	Producer  Role = iota // starts a kernel and may carry epilogues
	Pointwise             // one element at a time: an epilogue, or a kernel of a chain of them
	Solo                  // a kernel of its own, nothing fused
)

func in(p string) Tensor    { return Tensor{Path: p, In: true, Per: PerRow} }
func out(p string) Tensor   { return Tensor{Path: p, Out: true, Per: PerRow} }
func inout(p string) Tensor { return Tensor{Path: p, In: true, Out: true, Per: PerRow} }
func rowIndex(p string) Tensor {
	return Tensor{Path: p, In: true, Index: true, Per: PerCol}
}
func weight(p string) Tensor { return Tensor{Path: p, In: true} }
func optional(t Tensor, flag string) Tensor {
	t.Flag = flag
	return t
}
func reuse(t Tensor) Tensor {
	t.Reuse = true
	return t
}

var pointwise = []string{"activate", "add", "mul", "glu", "copy"}

// In BF16 precision a backend also rounds every F32 value written to it but NaN (torch's model
// holds BF16 weights and casts its float32 inputs, e.g. the pixel patches, to them), so every
// activation a graph starts from is BF16-exact, and the data-movement ops keep it so.

// Ops is the catalog, in the order the generated code lists it.
var Ops = []Op{
	{Name: "linear", Type: "Linear", Class: Reduction, Role: Producer, Rows: "X",
		Doc: []string{"Linear: Y = act(X·Wᵀ + B) + Res. X [M,K], W [N,K] (F32, BF16 or F16), B [1,N] optional,",
			"Res [M,N] optional (added after the activation), Y [M,N]. Y may alias Res."},
		Tensors:   []Tensor{in("X"), weight("W"), optional(weight("B"), "has_bias"), optional(reuse(in("Res")), "has_res"), out("Y")},
		Attrs:     []Attr{{"Act", "Act"}, {"Round", "LinearRound"}},
		Epilogues: []string{"rope", "activate", "add", "mul", "copy", "glu"},
		Consts:    []Const{{"N", "W", RowCount}, {"K", "X", Cols}},
		Round: []Round{{"product", "X·Wᵀ, when Round is RoundProduct and B is present (a BF16 convolution adds its bias after rounding)"},
			{"out", "X·Wᵀ + B, the linear's output (with RoundSum the bias is added before rounding)"},
			{"act", "act(·), when Act is set (QuickGELU, x·sigmoid(1.702x) in transformers, rounds after each of its three ops)"},
			{"res", "· + Res, when Res is present (the residual add)"}}},
	{Name: "rmsnorm", Type: "RMSNorm", Class: Reduction, Role: Producer, Rows: "X", Scale: "W",
		Doc: []string{"RMSNorm: Y = x / sqrt(mean(x²) + Eps) * W, per row. X, Y [M,D], W [1,D].",
			"With Res present, x = X + Res is formed first and also stored to Sum (the residual stream)."},
		Tensors:   []Tensor{in("X"), optional(in("Res"), "has_res"), optional(out("Sum"), "has_res"), weight("W"), out("Y")},
		Attrs:     []Attr{{"Eps", "float32"}},
		Epilogues: pointwise,
		Consts:    []Const{{"D", "X", Cols}, {"eps", "Eps", FloatAttr}},
		Round: []Round{{"sum", "X + Res, when Res is present (the residual stream, stored to Sum)"},
			{"norm", "x / sqrt(mean(x²) + Eps), computed in F32 (Qwen2RMSNorm's hidden.to(input_dtype))"},
			{"out", "W · that (Qwen2RMSNorm's weight * hidden)"}}},
	{Name: "layernorm", Type: "LayerNorm", Class: Reduction, Role: Producer, Rows: "X", Scale: "W",
		Doc:       []string{"LayerNorm: Y = (x - mean) / sqrt(var + Eps) * W + B, per row; var is the biased variance."},
		Tensors:   []Tensor{in("X"), weight("W"), optional(weight("B"), "has_bias"), out("Y")},
		Attrs:     []Attr{{"Eps", "float32"}},
		Epilogues: pointwise,
		Consts:    []Const{{"D", "X", Cols}, {"eps", "Eps", FloatAttr}},
		Round:     []Round{{"out", "the result, computed in F32 with W and B (torch's layer_norm rounds once)"}}},
	{Name: "rope", Type: "Rope", Class: Elementwise, Role: Solo, Rows: "X",
		Doc: []string{"Rope rotates each head of X in place by the angles of its row's positions, in the",
			"rotate-half layout: for pair j, (x[j], x[j+HeadDim/2]) → (x·cos − y·sin, y·cos + x·sin).",
			"X [R, Heads*HeadDim] (may be a column slice), Pos [R, len(Sections)] I32. As transformers does,",
			"even in a float64 model, inv_freq = 1/Theta^e and the angle pos·inv_freq are float32 values."},
		Tensors: []Tensor{inout("X"), {Path: "Pos", In: true, Index: true, Per: PerRow}},
		Attrs:   []Attr{{"Heads", "int"}, {"HeadDim", "int"}, {"Theta", "float32"}, {"Sections", "[]int"}, {"Mode", "RopeMode"}},
		Consts:  []Const{{"heads", "Heads", IntAttr}, {"head_dim", "HeadDim", IntAttr}, {"theta", "Theta", FloatAttr}},
		Round: []Round{{"table", "cos and sin of the angle, except in RopePerAxis (the text rotary casts them to the activations' dtype)"},
			{"terms", "x·cos and y·sin, except in RopePerAxis (products of BF16 tensors)"},
			{"out", "the rotated pair (RopePerAxis: the vision rotary computes in F32 and casts once)"}}},
	{Name: "attention", Type: "Attention", Class: Reduction, Role: Solo, Rows: "Q", Scale: "Scale",
		Doc: []string{"Attention writes softmax(Q·Kᵀ·Scale)·V per head into Y. Q [R, Heads*HeadDim], K and V",
			"[R, KVHeads*HeadDim] (column slices allowed); query head h reads KV head h/(Heads/KVHeads).",
			"",
			"Without a cache (Cache nil), Spans [1, S+1] I32 holds cumulative row offsets from 0 to R: a row attends to",
			"every row of its own span (full, non-causal). With a cache, K and V rows are first stored at",
			"their row's (sequence, position) and each row then attends causally to positions 0..pos of",
			"its own sequence."},
		Tensors: []Tensor{in("Q"), in("K"), in("V"), out("Y"), {Path: "Spans", In: true, Index: true, WithCache: -1, Per: PerSpan},
			{Path: "Cache.K", In: true, Out: true, WithCache: 1}, {Path: "Cache.V", In: true, Out: true, WithCache: 1},
			{Path: "Rows.RowSeq", In: true, Index: true, WithCache: 1, Per: PerCol}, {Path: "Rows.RowPos", In: true, Index: true, WithCache: 1, Per: PerCol},
			{Path: "Rows.PageTable", In: true, Index: true, WithCache: 1}},
		Attrs:  []Attr{{"Heads", "int"}, {"KVHeads", "int"}, {"HeadDim", "int"}, {"Scale", "float32"}, {"Cache", "*KVCache"}, {"Rows", "*Rows"}},
		Consts: []Const{{"heads", "Heads", IntAttr}, {"kv_heads", "KVHeads", IntAttr}, {"head_dim", "HeadDim", IntAttr}, {"scale", "Scale", FloatAttr}},
		Round: []Round{{"p", "the softmax weights exp(s − max) before P·V, scores and their sum F32 (as flash and SDPA kernels do; a kernel may take its running max)"},
			{"out", "the output, P·V over the F32 sum of weights"}}},
	{Name: "add", Type: "Add", Class: Elementwise, Role: Pointwise, Rows: "Y",
		Doc:     []string{"Add: Y = A + B, elementwise over equal shapes."},
		Tensors: []Tensor{reuse(in("A")), reuse(in("B")), out("Y")},
		Consts:  []Const{{"N", "Y", Cols}},
		Round:   []Round{{"out", "A + B"}}},
	{Name: "mul", Type: "Mul", Class: Elementwise, Role: Pointwise, Rows: "Y",
		Doc:     []string{"Mul: Y = A * B, elementwise over equal shapes."},
		Tensors: []Tensor{reuse(in("A")), reuse(in("B")), out("Y")},
		Consts:  []Const{{"N", "Y", Cols}},
		Round:   []Round{{"out", "A · B"}}},
	{Name: "activate", Type: "Activate", Class: Elementwise, Role: Pointwise, Rows: "Y",
		Doc:     []string{"Activate: Y = act(X)."},
		Tensors: []Tensor{reuse(in("X")), out("Y")},
		Attrs:   []Attr{{"Act", "Act"}},
		Consts:  []Const{{"N", "Y", Cols}},
		Round:   []Round{{"out", "act(X) (QuickGELU: after each of its three ops)"}}},
	{Name: "glu", Type: "GLU", Class: Elementwise, Role: Pointwise, Rows: "Y",
		Doc:     []string{"GLU: Y = act(Gate) * Up (SwiGLU with ActSiLU). Gate, Up, Y [M,F]."},
		Tensors: []Tensor{reuse(in("Gate")), reuse(in("Up")), out("Y")},
		Attrs:   []Attr{{"Act", "Act"}},
		Consts:  []Const{{"N", "Y", Cols}},
		Round:   []Round{{"act", "act(Gate), when Act is set"}, {"out", "· × Up"}}},
	{Name: "embed", Type: "Embed", Class: Exact, Role: Solo, Rows: "Y",
		Doc:     []string{"Embed: Y[r] = Table[Ids[r]]. Ids [1,R] I32, Table [V,D], Y [R,D]. An id outside [0,V) is an error."},
		Tensors: []Tensor{rowIndex("Ids"), weight("Table"), out("Y")},
		Consts:  []Const{{"D", "Y", Cols}, {"V", "Table", RowCount}}},
	{Name: "scatter", Type: "Scatter", Class: Exact, Role: Solo, Rows: "Src",
		Doc:     []string{"Scatter: Y[Index[i]] = Src[i] for each row i of Src. Index [1,n] I32."},
		Tensors: []Tensor{in("Src"), rowIndex("Index"), {Path: "Y", In: true, Out: true}},
		Consts:  []Const{{"D", "Y", Cols}}},
	{Name: "gather", Type: "Gather", Class: Exact, Role: Solo, Rows: "Y",
		Doc:     []string{"Gather: Y[i] = X[Index[i]]. Index [1,n] I32."},
		Tensors: []Tensor{weight("X"), rowIndex("Index"), out("Y")},
		Consts:  []Const{{"D", "Y", Cols}}},
	{Name: "argmax", Type: "Argmax", Class: Exact, Role: Solo, Rows: "X",
		Doc: []string{"Argmax: Y[r] = the first column of row r of X holding the row's largest value, as a greedy",
			"pick takes it (NaN never wins; a row of NaN gives 0). X [S,V], Y [1,S] I32."},
		Tensors: []Tensor{in("X"), {Path: "Y", Out: true, Index: true, Per: PerCol}},
		Consts:  []Const{{"V", "X", Cols}}},
	{Name: "copy", Type: "Copy", Class: Exact, Role: Pointwise, Rows: "Y",
		Doc:     []string{"Copy: Y = X (shapes equal; strides may differ)."},
		Tensors: []Tensor{in("X"), out("Y")},
		Consts:  []Const{{"N", "Y", Cols}}},
}

// Find is the catalog entry named name, or nil.
func Find(name string) *Op {
	for i := range Ops {
		if Ops[i].Name == name {
			return &Ops[i]
		}
	}
	return nil
}

// Tensor finds a tensor field by path, or nil.
func (o *Op) Tensor(path string) *Tensor {
	for i := range o.Tensors {
		if o.Tensors[i].Path == path {
			return &o.Tensors[i]
		}
	}
	return nil
}

// Fuses reports whether a kernel started by o may run next after it.
func (o *Op) Fuses(next string) bool {
	for _, e := range o.Epilogues {
		if e == next {
			return true
		}
	}
	return false
}

// Names lists the names of the ops of role r, in catalog order.
func Names(r Role) []string {
	var out []string
	for _, o := range Ops {
		if o.Role == r {
			out = append(out, o.Name)
		}
	}
	return out
}
