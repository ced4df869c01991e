package warehouse

// AdviseWillNeed is adviseWillNeed, for readahead_linux_test.go.
func (r *Reader) AdviseWillNeed(idx []int) { r.adviseWillNeed(idx) }
