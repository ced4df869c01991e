package kdb

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"warehouse-etl/sources"
)

// Extension is the file name extension of kinodb files.
const Extension = ".kdb"

// listFiles resolves a dataset root to .kdb files: base is the directory
// paths are relative to, rels the files relative to it (slash-separated),
// in natural order (demo_2.kdb before demo_10.kdb).
//
//   - an existing regular file: that file, relative to its directory;
//   - an existing directory: the regular *.kdb files directly inside it
//     whose name does not start with "." or "_";
//   - otherwise a glob (filepath.Match syntax): the regular files it
//     matches, relative to the longest leading directory without
//     metacharacters.
func listFiles(root string) (base string, rels []string, err error) {
	st, statErr := os.Stat(root)
	switch {
	case statErr == nil && st.Mode().IsRegular():
		return filepath.Dir(root), []string{filepath.Base(root)}, nil
	case statErr == nil && st.IsDir():
		entries, err := os.ReadDir(root)
		if err != nil {
			return "", nil, fmt.Errorf("kdb: list %s: %w", root, err)
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, Extension) || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				continue
			}
			if st, err := os.Stat(filepath.Join(root, name)); err == nil && st.Mode().IsRegular() {
				rels = append(rels, name)
			}
		}
		if len(rels) == 0 {
			return "", nil, fmt.Errorf("kdb: %s holds no %s files", root, Extension)
		}
		base = root
	case statErr == nil:
		return "", nil, fmt.Errorf("kdb: %s is neither a file nor a directory", root)
	case !sources.HasGlobMeta(root):
		return "", nil, fmt.Errorf("kdb: dataset root: %w", statErr)
	default:
		base, rels, err = sources.GlobFiles(root)
		if err != nil {
			return "", nil, fmt.Errorf("kdb: dataset root %q: %w", root, err)
		}
		if len(rels) == 0 {
			return "", nil, fmt.Errorf("kdb: %s matches no files", root)
		}
	}
	slices.SortFunc(rels, sources.NaturalCompare)
	return base, rels, nil
}
