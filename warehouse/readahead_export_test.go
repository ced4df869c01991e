package warehouse

// AdviseWillNeed is adviseWillNeed, for readahead_linux_test.go.
func (r *Reader) AdviseWillNeed(idx []int) { r.adviseWillNeed(idx) }

// AdviseWillNeed is adviseWillNeed, for readahead_linux_test.go.
func (m *Mixture) AdviseWillNeed(idx []int) { m.adviseWillNeed(idx) }

// Advised is how many batches the iterator advised; read it after Close.
func (it *BatchIterator) Advised() int { return it.adviser.advised }
