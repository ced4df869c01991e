package roverd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"warehouse-etl/sources/roverd/xzstream"
)

// ErrRecordSize is wrapped when a record's size or shape disagrees with
// its channel's meta.json (a block_size_mismatch).
var ErrRecordSize = errors.New("roverd: record size mismatch")

// ErrCorruptChannel is wrapped when a channel's own structure is broken:
// an lzmaf offsets file that goes backwards.
var ErrCorruptChannel = errors.New("roverd: corrupt channel")

// lzmafIndexSuffix names an lzmaf channel's offsets file.
const lzmafIndexSuffix = "_i"

// records reads a numeric channel's records by index. Record returns
// exactly the channel's RecordBytes bytes; it is safe for concurrent use
// and holds no open file between calls.
type records interface {
	Record(i int) ([]byte, error)
}

// extent is how many complete records a channel holds, and what was left
// over: a partial trailing record, offsets past the data, files after a
// gap. dropped is "" for a clean channel.
type extent struct {
	n       int
	dropped string
}

// channelFiles lists the files (relative to the sensor folder) a channel
// is read from; folders (npz, jpg) list every regular file in them.
func channelFiles(sensorDir string, c Channel) ([]string, error) {
	switch c.Format {
	case FormatLZMAF:
		return []string{c.Name, c.Name + lzmafIndexSuffix}, nil
	case FormatNPZ, FormatJPG:
		entries, err := os.ReadDir(filepath.Join(sensorDir, c.Name))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			return nil, err
		}
		var out []string
		for _, e := range entries {
			if e.Type().IsRegular() {
				out = append(out, c.Name+"/"+e.Name())
			}
		}
		return out, nil
	default:
		return []string{c.Name}, nil
	}
}

// openRecords opens a numeric channel of the sensor in dir. maxChannel
// bounds an lzma channel's whole decompressed size.
func openRecords(dir string, c Channel, maxChannel int64) (records, extent, error) {
	path := filepath.Join(dir, c.Name)
	switch c.Format {
	case FormatRaw:
		return openRaw(path, c)
	case FormatLZMA:
		return openLZMA(path, c, maxChannel)
	case FormatLZMAF:
		return openLZMAF(path, c)
	case FormatNPZ:
		return openNPZ(path, c)
	default:
		return nil, extent{}, fmt.Errorf("channel %s: format %s holds images, not numbers", c.Name, c.Format)
	}
}

// partialNote describes a partial trailing record.
func partialNote(rest, rec int64) string {
	return fmt.Sprintf("a partial trailing record of %d of %d bytes", rest, rec)
}

// rawRecords reads records straight from the file, opening it for each
// read so that a cached reader holds no file descriptor.
type rawRecords struct {
	path string
	rec  int64
	n    int
}

func openRaw(path string, c Channel) (records, extent, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, extent{}, err
	}
	r := &rawRecords{path: path, rec: c.RecordBytes, n: int(st.Size() / c.RecordBytes)}
	ext := extent{n: r.n}
	if rest := st.Size() % c.RecordBytes; rest != 0 {
		ext.dropped = partialNote(rest, c.RecordBytes)
	}
	return r, ext, nil
}

func (r *rawRecords) Record(i int) ([]byte, error) {
	if i < 0 || i >= r.n {
		return nil, fmt.Errorf("record %d out of range [0, %d)", i, r.n)
	}
	return readAt(r.path, int64(i)*r.rec, r.rec)
}

// readAt reads n bytes at off of the file at path.
func readAt(path string, off, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s is shorter than when it was indexed", ErrRecordSize, filepath.Base(path))
		}
		return nil, err
	}
	return b, nil
}

// memRecords holds a decompressed lzma channel.
type memRecords struct {
	data []byte
	rec  int64
	n    int
}

func openLZMA(path string, c Channel, maxChannel int64) (records, extent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, extent{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, extent{}, err
	}
	data, err := xzstream.Decompress(f, st.Size(), maxChannel)
	if err != nil {
		return nil, extent{}, err
	}
	r := &memRecords{data: data, rec: c.RecordBytes, n: int(int64(len(data)) / c.RecordBytes)}
	ext := extent{n: r.n}
	if rest := int64(len(data)) % c.RecordBytes; rest != 0 {
		ext.dropped = partialNote(rest, c.RecordBytes)
	}
	return r, ext, nil
}

func (r *memRecords) Record(i int) ([]byte, error) {
	if i < 0 || i >= r.n {
		return nil, fmt.Errorf("record %d out of range [0, %d)", i, r.n)
	}
	return r.data[int64(i)*r.rec : int64(i+1)*r.rec], nil
}

// lzmafRecords decompresses one .xz stream per record.
type lzmafRecords struct {
	path    string
	offsets []uint64 // n+1 offsets of the records that are complete on disk
	c       Channel
}

// maxCompressedRecord bounds what is read for one lzmaf record: .xz adds
// at most a few hundred bytes to incompressible data.
func maxCompressedRecord(rec int64) int64 { return rec + rec/8 + 64<<10 }

func openLZMAF(path string, c Channel) (records, extent, error) {
	idx, err := os.ReadFile(path + lzmafIndexSuffix) // 8 bytes a record: bounded by the data it indexes
	if err != nil {
		return nil, extent{}, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, extent{}, err
	}
	name := filepath.Base(path)
	var notes []string
	if rest := len(idx) % 8; rest != 0 {
		notes = append(notes, fmt.Sprintf("%s%s ends in a partial offset of %d bytes", name, lzmafIndexSuffix, rest))
	}
	offsets := make([]uint64, len(idx)/8)
	for i := range offsets {
		offsets[i] = binary.LittleEndian.Uint64(idx[8*i:])
		if i > 0 && offsets[i] < offsets[i-1] {
			return nil, extent{}, fmt.Errorf("%w: %s%s: offset %d (%d) is before offset %d (%d)", ErrCorruptChannel, name, lzmafIndexSuffix, i, offsets[i], i-1, offsets[i-1])
		}
	}
	// After a crash the offsets may run ahead of the data that reached
	// the disk: only records whose end is inside the file are complete.
	n := 0
	for n+1 < len(offsets) && offsets[n+1] <= uint64(st.Size()) {
		n++
	}
	if listed := max(len(offsets)-1, 0); n < listed {
		notes = append(notes, fmt.Sprintf("%s%s lists %d records, %s holds %d", name, lzmafIndexSuffix, listed, name, n))
	}
	r := &lzmafRecords{path: path, offsets: offsets[:n+min(1, len(offsets))], c: c}
	return r, extent{n: n, dropped: strings.Join(notes, "; ")}, nil
}

func (r *lzmafRecords) Record(i int) ([]byte, error) {
	if i < 0 || i+1 >= len(r.offsets) {
		return nil, fmt.Errorf("record %d out of range [0, %d)", i, max(len(r.offsets)-1, 0))
	}
	start, end := int64(r.offsets[i]), int64(r.offsets[i+1])
	if end-start > maxCompressedRecord(r.c.RecordBytes) {
		return nil, fmt.Errorf("%w: record %d is %d bytes compressed, more than a %d-byte record can need", ErrRecordSize, i, end-start, r.c.RecordBytes)
	}
	packed, err := readAt(r.path, start, end-start)
	if err != nil {
		return nil, fmt.Errorf("record %d: %w", i, err)
	}
	data, err := xzstream.DecompressBytes(packed, r.c.RecordBytes)
	if errors.Is(err, xzstream.ErrTooLarge) {
		return nil, fmt.Errorf("%w: record %d: %w", ErrRecordSize, i, err)
	}
	if err != nil {
		return nil, fmt.Errorf("record %d: %w", i, err)
	}
	if int64(len(data)) != r.c.RecordBytes {
		return nil, fmt.Errorf("%w: record %d decompresses to %d bytes, want %d", ErrRecordSize, i, len(data), r.c.RecordBytes)
	}
	return data, nil
}

// blobFolder is an npz or jpg channel: files 000000.<ext>, 000001.<ext>,
// ... in a folder named like the channel.
type blobFolder struct {
	dir string
	ext string
	n   int
}

// openBlobFolder counts the records: the files numbered from 0 without a
// gap. Files after a gap are not read, and reported as dropped.
func openBlobFolder(dir, ext string) (*blobFolder, extent, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, extent{}, err
	}
	present := map[int]bool{}
	for _, e := range entries {
		if i, ok := blobIndex(e.Name(), ext); ok && e.Type().IsRegular() {
			present[i] = true
		}
	}
	n := 0
	for present[n] {
		n++
	}
	ext2 := extent{n: n}
	if len(present) > n {
		ext2.dropped = fmt.Sprintf("%d files after the gap at %s", len(present)-n, blobName(n, ext))
	}
	return &blobFolder{dir: dir, ext: ext, n: n}, ext2, nil
}

// blobIndex parses "000012.npz" (six or more digits, as %06d writes).
func blobIndex(name, ext string) (int, bool) {
	stem, ok := strings.CutSuffix(name, "."+ext)
	if !ok || len(stem) < 6 {
		return 0, false
	}
	for i := 0; i < len(stem); i++ {
		if stem[i] < '0' || stem[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(stem)
	if err != nil || blobName(i, ext) != name {
		return 0, false
	}
	return i, true
}

func blobName(i int, ext string) string { return fmt.Sprintf("%06d.%s", i, ext) }

// read returns blob i's bytes, refusing files over limit before reading.
func (b *blobFolder) read(i int, limit int64) ([]byte, string, error) {
	if i < 0 || i >= b.n {
		return nil, "", fmt.Errorf("record %d out of range [0, %d)", i, b.n)
	}
	path := filepath.Join(b.dir, blobName(i, b.ext))
	f, err := os.Open(path)
	if err != nil {
		return nil, path, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, path, err
	}
	if st.Size() > limit {
		return nil, path, fmt.Errorf("%w: %s is %d bytes, more than the limit of %d", ErrRecordSize, blobName(i, b.ext), st.Size(), limit)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, path, err
	}
	return data, path, nil
}

// npzRecords reads npz blobs.
type npzRecords struct {
	*blobFolder
	c Channel
}

func openNPZ(dir string, c Channel) (records, extent, error) {
	b, ext, err := openBlobFolder(dir, "npz")
	if err != nil {
		return nil, extent{}, err
	}
	return &npzRecords{blobFolder: b, c: c}, ext, nil
}

func (r *npzRecords) Record(i int) ([]byte, error) {
	// A zip adds headers and a directory to the .npy; stored members are
	// as large as the record.
	data, _, err := r.read(i, 2*r.c.RecordBytes+maxNPZOverheadB)
	if err != nil {
		return nil, err
	}
	rec, err := readNPZRecord(bytes.NewReader(data), int64(len(data)), r.c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", blobName(i, "npz"), err)
	}
	return rec, nil
}
