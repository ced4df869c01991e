package container

import (
	"errors"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// Default limits (see Limits).
const (
	DefaultMaxEntries     = 1 << 20
	DefaultMaxStringTable = 16 << 20
	DefaultMaxBlockBytes  = 1 << 30
)

// Limits bound what a Reader allocates for untrusted sizes. Zero values
// mean the defaults.
type Limits struct {
	// MaxEntries is the largest entry_count accepted. A real episode has a
	// few dozen blocks. Default DefaultMaxEntries.
	MaxEntries int
	// MaxStringTable is the largest string table read. Default
	// DefaultMaxStringTable.
	MaxStringTable int64
	// MaxBlockBytes is the largest block ReadBlock holds in memory, checked
	// against both the stored and the original size before allocating.
	// Default DefaultMaxBlockBytes.
	MaxBlockBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxStringTable <= 0 {
		l.MaxStringTable = DefaultMaxStringTable
	}
	if l.MaxBlockBytes <= 0 {
		l.MaxBlockBytes = DefaultMaxBlockBytes
	}
	return l
}

// ErrTooLarge is wrapped by ReadBlock when an uncompressed block is larger
// than Limits.MaxBlockBytes: the file may be fine, but the caller must read
// such a block by range (ReadRange, Verify) instead of whole.
var ErrTooLarge = errors.New("block too large to read whole")

// Reader reads blocks of one container. Its methods are safe for
// concurrent use when the underlying io.ReaderAt is (an *os.File is).
type Reader struct {
	ra      io.ReaderAt
	file    string
	size    int64
	limits  Limits
	header  Header
	entries []Entry
	byHash  map[uint64][]int // name hash -> entries with that hash
}

// NewReader parses and checks the header, index and string table of a
// container of size bytes read through ra. file names the container in
// errors. It reads 64 bytes, the index and the string table, nothing else.
func NewReader(ra io.ReaderAt, size int64, file string, limits Limits) (*Reader, error) {
	r := &Reader{ra: ra, file: file, size: size, limits: limits.withDefaults()}
	if err := r.parse(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reader) corrupt(block, format string, args ...any) error {
	return fail(r.file, block, ErrCorrupt, format, args...)
}

func (r *Reader) parse() error {
	if r.size < HeaderSize {
		return r.corrupt("", "file is %d bytes, shorter than the %d-byte header", r.size, HeaderSize)
	}
	hb := make([]byte, HeaderSize)
	if err := r.readAt(hb, 0, ""); err != nil {
		return err
	}
	if string(hb[offMagic:offMagic+4]) != Magic {
		return r.corrupt("", "bad magic %q, want %q", hb[offMagic:offMagic+4], Magic)
	}
	h := parseHeader(hb)
	switch {
	case h.Version != Version2:
		return r.corrupt("", "unsupported version %d, want %d", h.Version, Version2)
	case h.EntrySize != EntrySize:
		return r.corrupt("", "index entry size %d, want %d", h.EntrySize, EntrySize)
	case h.Alignment != 0 && h.Alignment != 16 && h.Alignment != 32 && h.Alignment != 64:
		return r.corrupt("", "alignment %d, want 0, 16, 32 or 64", h.Alignment)
	case h.Compression > CompressLZ4:
		return fail(r.file, "", ErrDecompress, "unknown default compression %d", uint8(h.Compression))
	case h.FileSize != uint64(r.size):
		return r.corrupt("", "header says the file is %d bytes, it is %d (truncated or extended)", h.FileSize, r.size)
	}
	size := uint64(r.size)
	if int64(h.EntryCount) > int64(r.limits.MaxEntries) {
		return r.corrupt("", "entry_count %d exceeds the limit of %d", h.EntryCount, r.limits.MaxEntries)
	}
	indexEnd := HeaderSize + uint64(h.EntryCount)*EntrySize // cannot overflow: count < 2^32
	switch {
	case indexEnd > size:
		return r.corrupt("", "index of %d entries ends at %d, past the end of the file at %d", h.EntryCount, indexEnd, size)
	case h.StringTableOffset > size:
		return r.corrupt("", "string table offset %d is past the end of the file at %d", h.StringTableOffset, size)
	case h.StringTableOffset < indexEnd:
		return r.corrupt("", "index of %d entries ends at %d, past the string table at %d", h.EntryCount, indexEnd, h.StringTableOffset)
	case h.DataOffset > size:
		return r.corrupt("", "data section offset %d is past the end of the file at %d", h.DataOffset, size)
	case h.DataOffset < h.StringTableOffset:
		return r.corrupt("", "data section offset %d is before the string table at %d", h.DataOffset, h.StringTableOffset)
	case h.DataOffset-h.StringTableOffset > uint64(r.limits.MaxStringTable):
		return r.corrupt("", "string table of %d bytes exceeds the limit of %d", h.DataOffset-h.StringTableOffset, r.limits.MaxStringTable)
	case h.SchemaOffset != 0 && h.SchemaOffset >= size:
		return r.corrupt("", "schema offset %d is past the end of the file at %d", h.SchemaOffset, size)
	}
	r.header = h

	index := make([]byte, indexEnd-HeaderSize)
	if err := r.readAt(index, HeaderSize, ""); err != nil {
		return err
	}
	strtab := make([]byte, h.DataOffset-h.StringTableOffset)
	if err := r.readAt(strtab, int64(h.StringTableOffset), ""); err != nil {
		return err
	}
	r.entries = make([]Entry, h.EntryCount)
	r.byHash = make(map[uint64][]int, h.EntryCount)
	names := make(map[string]int, h.EntryCount)
	for i := range r.entries {
		e, err := r.checkEntry(i, parseEntry(index[i*EntrySize:]), strtab)
		if err != nil {
			return err
		}
		if j, dup := names[e.Name]; dup {
			return r.corrupt(e.Name, "name repeated by entries %d and %d", j, i)
		}
		names[e.Name] = i
		r.entries[i] = e
		r.byHash[e.NameHash] = append(r.byHash[e.NameHash], i)
	}
	return r.checkOverlaps()
}

// checkEntry resolves entry i's name and checks its fields against the
// file (see the package documentation).
func (r *Reader) checkEntry(i int, raw rawEntry, strtab []byte) (Entry, error) {
	label := entryLabel(i)
	nameEnd := uint64(raw.nameOffset) + uint64(raw.nameLength)
	if nameEnd > uint64(len(strtab)) {
		return Entry{}, r.corrupt(label, "name of %d bytes at string table offset %d overflows the string table of %d bytes", raw.nameLength, raw.nameOffset, len(strtab))
	}
	nameBytes := strtab[raw.nameOffset:nameEnd]
	if len(nameBytes) == 0 || !utf8.Valid(nameBytes) {
		return Entry{}, r.corrupt(label, "name %q is empty or not UTF-8", nameBytes)
	}
	name := string(nameBytes)
	if got := xxhash.Sum64(nameBytes); got != raw.hash {
		return Entry{}, fail(r.file, name, ErrChecksum, "name hash 0x%016x in the index, xxHash64 of the name is 0x%016x", raw.hash, got)
	}
	comp, err := resolveCompression(raw.flags, r.header.Compression)
	if err != nil {
		return Entry{}, fail(r.file, name, ErrDecompress, "%v", err)
	}
	size := uint64(r.size)
	switch {
	case comp == CompressNone && raw.diskSize != raw.origSize:
		return Entry{}, r.corrupt(name, "uncompressed block with disk size %d but original size %d", raw.diskSize, raw.origSize)
	case raw.offset < r.header.DataOffset:
		return Entry{}, r.corrupt(name, "data offset %d is before the data section at %d", raw.offset, r.header.DataOffset)
	case raw.offset > size || raw.diskSize > size-raw.offset:
		return Entry{}, r.corrupt(name, "%d bytes at offset %d run past the end of the file at %d", raw.diskSize, raw.offset, size)
	case r.header.Alignment != 0 && raw.offset%uint64(r.header.Alignment) != 0:
		return Entry{}, r.corrupt(name, "data offset %d is not a multiple of the alignment %d", raw.offset, r.header.Alignment)
	case comp == CompressLZ4 && raw.origSize > lz4MaxDecoded(raw.diskSize):
		return Entry{}, fail(r.file, name, ErrDecompress, "original size %d cannot come from %d lz4 bytes (at most %d)", raw.origSize, raw.diskSize, lz4MaxDecoded(raw.diskSize))
	}
	return Entry{
		Name: name, NameHash: raw.hash, Flags: raw.flags, Offset: raw.offset,
		DiskSize: raw.diskSize, OrigSize: raw.origSize, CRC: raw.crc, ContentType: raw.contentType,
		compression: comp,
	}, nil
}

// checkOverlaps rejects blocks sharing bytes: a writer never produces them,
// and a checksum over shared bytes would vouch for two blocks at once.
func (r *Reader) checkOverlaps() error {
	order := make([]int, 0, len(r.entries))
	for i, e := range r.entries {
		if e.DiskSize > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		ea, eb := r.entries[a], r.entries[b]
		switch {
		case ea.Offset < eb.Offset:
			return -1
		case ea.Offset > eb.Offset:
			return 1
		}
		return a - b
	})
	for k := 1; k < len(order); k++ {
		prev, cur := r.entries[order[k-1]], r.entries[order[k]]
		if cur.Offset < prev.Offset+prev.DiskSize {
			return r.corrupt(cur.Name, "bytes %d..%d overlap block %q at %d..%d", cur.Offset, cur.Offset+cur.DiskSize, prev.Name, prev.Offset, prev.Offset+prev.DiskSize)
		}
	}
	return nil
}

// readAt fills p from offset off. A short read means the file shrank after
// its size was taken: that is corruption of what was promised, not an I/O
// failure.
func (r *Reader) readAt(p []byte, off int64, block string) error {
	n, err := r.ra.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return r.corrupt(block, "read %d of %d bytes at offset %d: the file is shorter than it was when opened", n, len(p), off)
	}
	return &Error{File: r.file, Block: block, Err: err}
}

// File is the name the Reader reports in errors.
func (r *Reader) File() string { return r.file }

// Size is the container's size in bytes.
func (r *Reader) Size() int64 { return r.size }

// Limits are the limits the Reader applies, defaults filled in.
func (r *Reader) Limits() Limits { return r.limits }

// Header returns the parsed header.
func (r *Reader) Header() Header { return r.header }

// Entries returns the index entries in index order. The slice is shared:
// do not modify it.
func (r *Reader) Entries() []Entry { return r.entries }

// Lookup finds a block by name through its xxHash64, as the index is meant
// to be searched.
func (r *Reader) Lookup(name string) (Entry, bool) {
	for _, i := range r.byHash[xxhash.Sum64String(name)] {
		if r.entries[i].Name == name {
			return r.entries[i], true
		}
	}
	return Entry{}, false
}

// shouldCheckCRC reports whether e's stored CRC is to be checked.
func (r *Reader) shouldCheckCRC(e Entry) bool {
	return e.CRC != 0 || r.header.Flags&FlagHasChecksums != 0
}

func (r *Reader) checkCRC(e Entry, got uint32) error {
	if r.shouldCheckCRC(e) && got != e.CRC {
		return fail(r.file, e.Name, ErrChecksum, "CRC32C of the uncompressed bytes is 0x%08x, the index says 0x%08x", got, e.CRC)
	}
	return nil
}

// ReadBlock returns e's uncompressed bytes, checked against its CRC32C.
// Sizes are checked against Limits.MaxBlockBytes before anything is
// allocated.
func (r *Reader) ReadBlock(e Entry) ([]byte, error) {
	limit := uint64(r.limits.MaxBlockBytes)
	if e.OrigSize > limit || e.DiskSize > limit {
		if e.compression != CompressNone {
			return nil, fail(r.file, e.Name, ErrDecompress, "original size %d (stored %d) exceeds the limit of %d bytes", e.OrigSize, e.DiskSize, limit)
		}
		return nil, fail(r.file, e.Name, ErrTooLarge, "%d bytes exceed the limit of %d", e.OrigSize, limit)
	}
	// decompress allocates the original size before decoding: refuse a
	// size the stored bytes cannot decode to first (lz4's bound is checked
	// by NewReader already).
	if e.compression == CompressZstd && e.OrigSize > zstdMaxDecoded(e.DiskSize) {
		return nil, fail(r.file, e.Name, ErrDecompress, "original size %d cannot come from %d zstd bytes (at most %d)", e.OrigSize, e.DiskSize, zstdMaxDecoded(e.DiskSize))
	}
	stored := make([]byte, e.DiskSize)
	if err := r.readAt(stored, int64(e.Offset), e.Name); err != nil {
		return nil, err
	}
	out := stored
	if e.compression != CompressNone {
		var err error
		if out, err = decompress(e.compression, stored, int(e.OrigSize)); err != nil {
			return nil, fail(r.file, e.Name, ErrDecompress, "%s: %v", e.compression, err)
		}
	}
	if err := r.checkCRC(e, Checksum(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// Verify checks e's CRC32C. An uncompressed block is streamed through the
// checksum in small pieces, so a block of any size is verified in bounded
// memory; a compressed one is read whole with ReadBlock.
func (r *Reader) Verify(e Entry) error {
	if e.compression != CompressNone {
		_, err := r.ReadBlock(e)
		return err
	}
	if !r.shouldCheckCRC(e) {
		return nil
	}
	buf := make([]byte, min(e.DiskSize, 1<<20))
	var crc uint32
	for off := uint64(0); off < e.DiskSize; {
		n := min(uint64(len(buf)), e.DiskSize-off)
		if err := r.readAt(buf[:n], int64(e.Offset+off), e.Name); err != nil {
			return err
		}
		crc = crc32.Update(crc, crc32c, buf[:n])
		off += n
	}
	return r.checkCRC(e, crc)
}

// ReadRange fills p with the bytes of uncompressed block e starting at
// offset off within the block. It does not check the CRC (see Verify).
func (r *Reader) ReadRange(e Entry, off int64, p []byte) error {
	if e.compression != CompressNone {
		return fail(r.file, e.Name, ErrDecompress, "range read of a %s-compressed block", e.compression)
	}
	if off < 0 || uint64(off) > e.OrigSize || uint64(len(p)) > e.OrigSize-uint64(off) {
		return r.corrupt(e.Name, "range of %d bytes at %d is outside the block of %d bytes", len(p), off, e.OrigSize)
	}
	return r.readAt(p, int64(e.Offset)+off, e.Name)
}

// File is a Reader over an open file; Close releases it.
type File struct {
	*Reader
	f *os.File
}

// Open opens the container at path. Errors name it as name, or as path
// when name is "". Failures to open or stat the file are returned as the
// operating system reports them.
func Open(path, name string, limits Limits) (*File, error) {
	if name == "" {
		name = path
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := NewReader(f, st.Size(), name, limits)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{Reader: r, f: f}, nil
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }
