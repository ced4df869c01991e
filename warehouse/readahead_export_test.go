package warehouse

import "os"

// AdviseWillNeed is adviseWillNeed, for readahead_linux_test.go.
func (r *Reader) AdviseWillNeed(idx []int) { r.adviseWillNeed(idx) }

// AdviseWillNeed is adviseWillNeed, for readahead_linux_test.go.
func (m *Mixture) AdviseWillNeed(idx []int) { m.adviseWillNeed(idx) }

// Advised is how many batches the iterator advised; read it after Close.
func (it *BatchIterator) Advised() int { return it.adviser.advised }

// SetReadCached replaces shard.ReadCached in the Reader's reads until the
// returned function restores it.
func SetReadCached(f func(*os.File, []byte, int64) (int, bool)) (restore func()) {
	old := readCached
	readCached = f
	return func() { readCached = old }
}
