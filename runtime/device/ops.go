package device

//go:generate go run ./internal/opsgen

// Op is one operation of the closed catalog; its struct is generated from package catalog
// (ops_gen.go). Operands are Tensors; attributes are plain fields. An output may alias an input exactly (same buffer, offset and shape) where an op says so:
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

// LinearRound says where a linear with a bias rounds in BF16 precision.
type LinearRound uint8

const (
	RoundSum     LinearRound = iota // X·Wᵀ + B rounded once (torch's linear)
	RoundProduct                    // X·Wᵀ rounded, then + B rounded (torch's BF16 convolution)
)

// RopeMode says how a rope op picks each rotary pair's frequency and position axis.
type RopeMode uint8

const (
	// RopeSections: pair j of HeadDim/2 takes axis a where Sections partition the pairs in axis
	// order, and frequency Theta^(-2j/HeadDim) (M-RoPE; one section is plain 1-D RoPE).
	RopeSections RopeMode = iota
	// RopePerAxis: as RopeSections, but the frequency index restarts in each section:
	// pair j' of section s has frequency Theta^(-j'/Sections[s]) (2-D vision RoPE).
	RopePerAxis
	// RopeAlternating: the axes take turns over the frequencies: pair j' of section s has frequency
	// Theta^(-2(A*j'+s)/HeadDim) for A equal sections (Pixtral's 2-D RoPE: rows even, columns odd).
	RopeAlternating
)

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
