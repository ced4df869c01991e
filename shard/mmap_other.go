//go:build !unix

package shard

import (
	"io"
	"os"
)

// mapFile reads the file into memory where this package has no mmap.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
