//go:build linux

package warehouse

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = uintptr(os.Getpagesize())

// populate asks the kernel to map every page of b (a view into a shard
// mapping) in one call, MADV_POPULATE_READ (Linux 5.14+), instead of one
// page fault per page or per fault-around block during the copy that
// follows. Page tables, not data: on a warm page cache this is what makes
// the first copy from a fresh mapping run near memcpy speed. Errors (an
// older kernel says EINVAL) are ignored: the copy faults the pages anyway.
func populate(b []byte) {
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	aligned := start &^ (pageSize - 1)
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, aligned, start+uintptr(len(b))-aligned, unix.MADV_POPULATE_READ)
}

// hugePage is the size of a transparent huge page on the platforms that
// have them (x86-64, arm64 with 4 KiB pages).
const hugePage = 2 << 20

// prefault makes the fresh batch buffer b resident before the first read
// writes it: the 2 MiB-aligned part of it is marked MADV_HUGEPAGE (where
// transparent huge pages are "madvise", so the kernel zeroes a huge page per
// fault instead of 512 small ones) and all of it is faulted in with one
// MADV_POPULATE_WRITE (Linux 5.14+) instead of one fault per page during
// the reads of the first epoch. Errors (older kernels, no THP) are ignored:
// the reads fault the pages in anyway.
func prefault(b []byte) {
	if len(b) < hugePage {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := start + uintptr(len(b))
	if hs, he := (start+hugePage-1)&^(hugePage-1), end&^(hugePage-1); he > hs {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, hs, he-hs, unix.MADV_HUGEPAGE)
	}
	ps, pe := (start+pageSize-1)&^(pageSize-1), end&^(pageSize-1)
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, ps, pe-ps, unix.MADV_POPULATE_WRITE)
}
