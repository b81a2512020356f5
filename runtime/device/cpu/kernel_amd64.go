//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func sgemm6x16AVX2(kc int, a *float32, lda int, b, c *float32, ldc int)

//go:noescape
func sgemm6x16AVX2BF16(kc int, a *float32, lda int, b *uint16, c *float32, ldc int)

//go:noescape
func sgemm6x32AVX512(kc int, a *float32, lda int, b, c *float32, ldc int)

//go:noescape
func sgemm6x32AVX512BF16(kc int, a *float32, lda int, b *uint16, c *float32, ldc int)

//go:noescape
func sgemm1x64AVX2(kc int, a, b *float32, pstride int, c *float32)

//go:noescape
func sgemm1x64AVX2BF16(kc int, a *float32, b *uint16, pstride int, c *float32)

//go:noescape
func sgemm1x128AVX512(kc int, a, b *float32, pstride int, c *float32)

//go:noescape
func sgemm1x128AVX512BF16(kc int, a *float32, b *uint16, pstride int, c *float32)

//go:noescape
func fmaPeakAVX2(n int)

//go:noescape
func fmaPeakAVX512(n int)

// hostKernels lists the FMA micro-kernels this CPU can run, widest first.
func hostKernels() []*microKernel {
	var ks []*microKernel
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, &microKernel{name: "avx512", mr: 6, nr: 32,
			run: func(kc int, a []float32, lda int, b, c []float32, ldc int) {
				_, _, _ = a[5*lda+kc-1], b[32*kc-1], c[5*ldc+31]
				sgemm6x32AVX512(kc, unsafe.SliceData(a), lda, unsafe.SliceData(b), unsafe.SliceData(c), ldc)
			},
			runBF16: func(kc int, a []float32, lda int, b []uint16, c []float32, ldc int) {
				_, _, _ = a[5*lda+kc-1], b[32*kc-1], c[5*ldc+31]
				sgemm6x32AVX512BF16(kc, unsafe.SliceData(a), lda, unsafe.SliceData(b), unsafe.SliceData(c), ldc)
			},
			row: func(kc int, a, b []float32, pstride int, c []float32) {
				_, _, _ = a[kc-1], b[3*pstride+32*kc-1], c[127]
				sgemm1x128AVX512(kc, unsafe.SliceData(a), unsafe.SliceData(b), 4*pstride, unsafe.SliceData(c))
			},
			rowBF16: func(kc int, a []float32, b []uint16, pstride int, c []float32) {
				_, _, _ = a[kc-1], b[3*pstride+32*kc-1], c[127]
				sgemm1x128AVX512BF16(kc, unsafe.SliceData(a), unsafe.SliceData(b), 2*pstride, unsafe.SliceData(c))
			},
			peak: fmaPeakAVX512, peakFlops: 384})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, &microKernel{name: "avx2", mr: 6, nr: 16,
			run: func(kc int, a []float32, lda int, b, c []float32, ldc int) {
				_, _, _ = a[5*lda+kc-1], b[16*kc-1], c[5*ldc+15]
				sgemm6x16AVX2(kc, unsafe.SliceData(a), lda, unsafe.SliceData(b), unsafe.SliceData(c), ldc)
			},
			runBF16: func(kc int, a []float32, lda int, b []uint16, c []float32, ldc int) {
				_, _, _ = a[5*lda+kc-1], b[16*kc-1], c[5*ldc+15]
				sgemm6x16AVX2BF16(kc, unsafe.SliceData(a), lda, unsafe.SliceData(b), unsafe.SliceData(c), ldc)
			},
			row: func(kc int, a, b []float32, pstride int, c []float32) {
				_, _, _ = a[kc-1], b[3*pstride+16*kc-1], c[63]
				sgemm1x64AVX2(kc, unsafe.SliceData(a), unsafe.SliceData(b), 4*pstride, unsafe.SliceData(c))
			},
			rowBF16: func(kc int, a []float32, b []uint16, pstride int, c []float32) {
				_, _, _ = a[kc-1], b[3*pstride+16*kc-1], c[63]
				sgemm1x64AVX2BF16(kc, unsafe.SliceData(a), unsafe.SliceData(b), 2*pstride, unsafe.SliceData(c))
			},
			peak: fmaPeakAVX2, peakFlops: 192})
	}
	return ks
}
