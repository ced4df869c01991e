package warehouse

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
)

// FileEntry is one input file in the source fingerprint (one line of
// fingerprint.jsonl): what a source's Fingerprint reports for every file
// its scan reads.
type FileEntry struct {
	Path    string `json:"path"` // relative to the dataset root, slash-separated
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	// SHA256 is the hex digest of the file's content, for the files that
	// describe a whole dataset (a COCO annotations file, a YOLO data.yaml):
	// an edit that keeps size and mtime still makes the version stale.
	// Empty for everything else.
	SHA256 string `json:"sha256,omitempty"`
}

// FingerprintName is the listing's file name inside a version directory.
const FingerprintName = "fingerprint.jsonl"

// FingerprintWriter streams the listing as JSON lines (when w is not nil)
// and hashes it: sha256 over "path\x00size\x00mtime_ns\n" per entry (with
// "\x00sha256" before the newline when the entry has a content digest), in
// the source's stable order.
type FingerprintWriter struct {
	enc   *json.Encoder
	h     hash.Hash
	files int64
	bytes int64
}

// NewFingerprintWriter writes the listing to w; w may be nil to only hash.
func NewFingerprintWriter(w io.Writer) *FingerprintWriter {
	fw := &FingerprintWriter{h: sha256.New()}
	if w != nil {
		fw.enc = json.NewEncoder(w)
	}
	return fw
}

// Add records one file.
func (fw *FingerprintWriter) Add(e FileEntry) error {
	if e.SHA256 != "" {
		fmt.Fprintf(fw.h, "%s\x00%d\x00%d\x00%s\n", e.Path, e.Size, e.MtimeNs, e.SHA256)
	} else {
		fmt.Fprintf(fw.h, "%s\x00%d\x00%d\n", e.Path, e.Size, e.MtimeNs)
	}
	fw.files++
	fw.bytes += e.Size
	if fw.enc != nil {
		return fw.enc.Encode(e)
	}
	return nil
}

// Sum returns the summary stored in the manifest.
func (fw *FingerprintWriter) Sum() Fingerprint {
	return Fingerprint{Files: fw.files, Bytes: fw.bytes, SHA256: hex.EncodeToString(fw.h.Sum(nil))}
}

// FirstChange compares a stored listing with the current one, both in the
// source's order, and describes the first difference ("" when none).
func FirstChange(listing string, current func(fn func(FileEntry) error) error) (string, error) {
	f, err := os.Open(listing)
	if err != nil {
		return "", err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	next := func() (*FileEntry, error) {
		var e FileEntry
		if err := dec.Decode(&e); err == io.EOF {
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", listing, err)
		}
		return &e, nil
	}
	errFound := errors.New("found")
	var change string
	err = current(func(cur FileEntry) error {
		old, err := next()
		if err != nil {
			return err
		}
		switch {
		case old == nil:
			change = fmt.Sprintf("%s was added", cur.Path)
		case old.Path != cur.Path:
			change = fmt.Sprintf("%s was added or %s was removed", cur.Path, old.Path)
		case old.Size != cur.Size:
			change = fmt.Sprintf("%s changed size (%d -> %d bytes)", cur.Path, old.Size, cur.Size)
		case old.MtimeNs != cur.MtimeNs:
			change = fmt.Sprintf("%s was modified (mtime changed)", cur.Path)
		case old.SHA256 != cur.SHA256:
			change = fmt.Sprintf("%s was modified (content changed)", cur.Path)
		default:
			return nil
		}
		return errFound
	})
	if err != nil && err != errFound {
		return "", err
	}
	if change != "" {
		return change, nil
	}
	old, err := next()
	if err != nil {
		return "", err
	}
	if old != nil {
		return fmt.Sprintf("%s was removed", old.Path), nil
	}
	return "", nil
}
