package yolo

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxListLine is the longest line of a list file: far beyond any path.
const maxListLine = 1 << 20

// listFile reads the images a list file names, one per line.
func (s *Source) listFile(e splitEntry, st *entryStats) ([]imageRef, error) {
	f, err := os.Open(e.abs)
	if err != nil {
		return nil, fmt.Errorf("yolo: list file %s: %w", e.name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxListLine)
	dir := filepath.Dir(e.abs)
	var out []imageRef
	for first := true; sc.Scan(); first = false {
		line := sc.Text()
		if first {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !isImageName(line) {
			st.skipped++
			continue
		}
		var p string
		switch {
		case strings.HasPrefix(line, "./"):
			p = filepath.Join(dir, line[2:])
		case filepath.IsAbs(line):
			p = filepath.Clean(line)
		default:
			p = filepath.Join(s.root, line)
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil || !filepath.IsLocal(rel) {
			out = append(out, imageRef{key: filepath.ToSlash(line), escape: true})
			continue
		}
		rel = filepath.ToSlash(rel)
		out = append(out, imageRef{rel: rel, key: rel})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("yolo: list file %s: %w", e.name, err)
	}
	if st.skipped > 0 {
		s.log.Warn("list file entries without an image extension skipped", "list", e.name, "entries", st.skipped)
	}
	return out, nil
}

// sortedFormats lists the image extensions for messages.
func sortedFormats() []string {
	return slices.Sorted(maps.Keys(imageFormats))
}
