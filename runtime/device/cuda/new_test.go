//go:build !gpu

package cuda

import (
	"strings"
	"testing"
)

// TestNewWithoutDriver: where libcuda.so.1 is absent, New says so and names the fix.
func TestNewWithoutDriver(t *testing.T) {
	be, err := New()
	if err == nil {
		be.Close()
		t.Skip("this machine has a CUDA driver and a device")
	}
	if !strings.Contains(err.Error(), "cuda:") || !(strings.Contains(err.Error(), "libcuda.so.1") || strings.Contains(err.Error(), "CUDA_ERROR")) {
		t.Fatalf("New: %v", err)
	}
	t.Logf("New: %v", err)
}
