//go:build !unix

package checkpoint

import (
	"io"
	"os"
)

// mapFile reads the first size bytes of f where memory mapping is not available.
func mapFile(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	_, err := io.ReadFull(io.NewSectionReader(f, 0, size), b)
	return b, err
}

func unmapFile([]byte) error { return nil }
