// Package contracts holds the float64 meaning of every op of the device catalog and the
// contract that checks a backend against it.
//
// The references are deliberately plain: one loop per formula, float64 throughout, no
// blocking, no fusion. Matrices are row-major float64 slices with explicit shapes. Expect runs
// an op's reference on host copies of its operands; Check poisons a backend's outputs, runs the
// op there, and compares; Cases is the suite of shapes every backend must pass.
//
// The kernel contract (tfc contract) checks a generated family's kernels instead of single ops:
// a registered Family lists the kernels its schedule launches with their specialised op chains;
// Chain builds a kernel's ops over random operands, ExpectChain gives the float64 result of the
// chain, CheckKernel runs gates 1 to 4 (gates.go) and Run adds the planted controls, which a GPU
// target builds from compiler/emit/hip mutants and a host target plants as wrappers (host.go).
//
// Precision classes and their bounds (errors are measured per output row, relative to the
// row's largest finite reference magnitude; NaN must meet NaN and ±Inf the same infinity):
//
//	op         class        backend arithmetic                                     bound
//	linear     reduction    float32 products, float32 accumulation in k order      1e-5·max(1, √(K/1024))
//	rmsnorm    reduction    Σx² in float64, scaling in float32                     1e-5 (Sum: elementwise)
//	layernorm  reduction    mean, variance in float64, normalising in float32      1e-5
//	attention  reduction    float32 scores and Σp·v, exp rounded from float64      1e-5·max(1, √(keys/1024))
//	rope       elementwise  float32 angle pos·inv_freq (as transformers), rotation  2e-6
//	add, mul   elementwise  one float32 operation                                  2e-6
//	activate   elementwise  computed in float64, rounded once                      2e-6
//	glu        elementwise  act rounded to float32, times up                       2e-6
//	embed, gather, scatter, copy, KV-cache stores   exact: bits equal the reference rounded to the output dtype
//
// Weights in BF16 or F16 are exact inputs: both sides read the same widened values. An output
// stored in BF16 or F16 adds that format's rounding to the bound (2^-8, 2^-10).
//
// Rope's angle is the float32 product pos·inv_freq with inv_freq = 1/theta^e in float32, the
// way transformers forms it even when the model runs in float64; the reference then rotates in
// float64. Everything else is exact real arithmetic rounded once to float64.
//
// In BF16 precision (ExpectIn, a backend whose device.PrecisionOf is BF16Precision) the
// reference rounds to BF16 at each op's catalog rounding points, and each output element gets a
// slack: one BF16 ulp of the value at every rounding point that feeds it, carried through what
// follows, for a point where the backend's F32 value and the float64 value round apart (bf16.go).
// Gate 1 allows the slack beyond the class bound and requires every stored F32 value to be
// BF16-exact; gates 2 to 4 stay exact.
package contracts
