package warehouse

// Internals the external tests (package warehouse_test, which build their
// versions with warehousetest) reach through exported names.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"testing/fstest"

	"warehouse-etl/shard"
)

// ReadPiece is readPiece.
const ReadPiece = readPiece

// NewBatch is newBatch.
var NewBatch = newBatch

// SetMinPieceBytes sets minPieceBytes until the returned func restores it.
func SetMinPieceBytes(n int) (restore func()) {
	old := minPieceBytes
	minPieceBytes = n
	return func() { minPieceBytes = old }
}

// BatchPieces is the rows [lo, hi) of each piece newBatchJob splits a
// batch of size rows of layout l into for workers goroutines.
func BatchPieces(l shard.Layout, size, workers int) [][2]int {
	_, pieces := newBatchJob(&Batch{Layout: l, Indices: make([]int, size)}, workers) // only its shape is read
	var out [][2]int
	for _, p := range pieces {
		out = append(out, [2]int{p.lo, p.hi})
	}
	return out
}

// NewMemReader is newReader over shard files held in memory (FuzzOpen).
func NewMemReader(dir string, m *Manifest, opts OpenOptions, files fstest.MapFS) (*Reader, error) {
	return newReader(dir, m, opts, slog.New(slog.DiscardHandler), memFiles{files})
}

// memFiles is a version's shard files in memory, for FuzzOpen: the same
// checks as dirFiles (checkShardInfo, shard.Parse, the sha256) on bytes
// instead of a directory and a mapping.
type memFiles struct{ fsys fstest.MapFS }

func (m memFiles) stat(path string, e *Shard) error {
	fi, err := fs.Stat(m.fsys, e.RelativePath)
	return checkShardInfo(path, e, fi, err)
}

func (m memFiles) checkSHA256(path string, e *Shard) error {
	sum := sha256.Sum256(m.fsys[e.RelativePath].Data)
	if got := hex.EncodeToString(sum[:]); got != e.ChecksumSHA256 {
		return errors.New(path + ": sha256 " + got + ", the manifest says " + e.ChecksumSHA256)
	}
	return nil
}

func (m memFiles) open(path string, e *Shard) (shardFile, *shard.Reader, error) {
	b := m.fsys[e.RelativePath].Data
	sr, err := shard.Parse(b)
	if err != nil {
		return nil, nil, errors.Join(errors.New(path), err)
	}
	return nopCloser{bytes.NewReader(b)}, sr, nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
