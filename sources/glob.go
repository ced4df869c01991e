package sources

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// HasGlobMeta reports whether p contains filepath.Match metacharacters.
func HasGlobMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// GlobFiles resolves a dataset-root pattern (filepath.Match syntax) to the
// regular files it matches: base is the longest leading directory of the
// pattern without metacharacters ("data/run*/ep_?.kdb" -> "data"), rels
// the matches relative to it, slash-separated, in natural order. No match
// is not an error (rels is empty); a malformed pattern is
// filepath.ErrBadPattern.
func GlobFiles(pattern string) (base string, rels []string, err error) {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return "", nil, err
	}
	base = filepath.Dir(pattern)
	for HasGlobMeta(base) {
		base = filepath.Dir(base)
	}
	for _, m := range matches {
		if st, err := os.Stat(m); err != nil || !st.Mode().IsRegular() {
			continue
		}
		rel, err := filepath.Rel(base, m)
		if err != nil {
			return "", nil, err
		}
		rels = append(rels, filepath.ToSlash(rel))
	}
	slices.SortFunc(rels, NaturalCompare)
	return base, rels, nil
}
