//go:build !amd64 || purego

package cpu

func hostKernels() []*microKernel { return nil }
