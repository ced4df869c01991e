package wshard

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"warehouse-etl/sources/wshard/container"
	"warehouse-etl/validate"

	"warehouse-etl/sources"
)

// Ext is the file extension of WShard files.
const Ext = ".wshard"

// listInputs resolves the dataset root to a base directory and the files
// under it, as slash-separated paths relative to base, in natural order:
//
//   - a regular file: that file (base is its directory);
//   - a directory: every *.wshard file below it, recursively; names
//     starting with "." are skipped (hidden files, .partial leftovers of a
//     crashed writer keep their own suffix anyway), symbolic links to
//     files are followed, to directories not;
//   - a path that does not exist but contains glob characters (* ? [): the
//     regular files it matches, whatever their extension; base is the
//     longest leading directory without glob characters.
func listInputs(root string) (base string, rels []string, err error) {
	st, statErr := os.Stat(root)
	switch {
	case statErr == nil && st.Mode().IsRegular():
		return filepath.Dir(root), []string{filepath.Base(root)}, nil
	case statErr == nil && st.IsDir():
		rels, err = walkEpisodes(root)
		if err == nil && len(rels) == 0 {
			err = fmt.Errorf("wshard: dataset root %s holds no %s files", root, Ext)
		}
		return root, rels, err
	case statErr == nil:
		return "", nil, fmt.Errorf("wshard: dataset root %s is neither a file nor a directory", root)
	case errors.Is(statErr, fs.ErrNotExist) && strings.ContainsAny(root, "*?["):
		return globEpisodes(root)
	}
	return "", nil, fmt.Errorf("wshard: dataset root: %w", statErr)
}

func walkEpisodes(root string) ([]string, error) {
	var rels []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("wshard: list %s: %w", p, err)
		}
		if p == root {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), Ext) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() {
				return nil // a dangling link or a link to a directory is not an episode
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rels = append(rels, filepath.ToSlash(rel))
		return nil
	})
	slices.SortFunc(rels, sources.NaturalCompare)
	return rels, err
}

func globEpisodes(pattern string) (string, []string, error) {
	base, rels, err := sources.GlobFiles(pattern)
	if err != nil {
		return "", nil, fmt.Errorf("wshard: dataset root %q: %w", pattern, err)
	}
	if len(rels) == 0 {
		return "", nil, fmt.Errorf("wshard: dataset root %q matches no files", pattern)
	}
	return base, rels, nil
}

// episodePlan is one episode to scan: a single file, or a manifest and its
// chunks in chunk order.
type episodePlan struct {
	rel      string // the episode file or the manifest, relative to the base
	manifest *manifestPlan
}

// manifestPlan is a parsed chunk manifest (role 0x04, block meta/manifest).
type manifestPlan struct {
	episodeID      string
	envID          string
	totalChunks    *int
	totalTimesteps *int64
	chunks         []chunkPlan
	problem        error // the manifest itself is unreadable: one placeholder sample
}

// chunkPlan is one manifest entry.
type chunkPlan struct {
	index    int
	rel      string // the chunk file relative to the base; "" when its uri escapes
	declared bool   // start and length come from the manifest
	start    int64
	length   int64
	problem  error // path_escape, or a range that disagrees with its length
}

type manifestJSON struct {
	EpisodeID      string `json:"episode_id"`
	EnvID          string `json:"env_id"`
	TotalChunks    *int   `json:"total_chunks"`
	TotalTimesteps *int64 `json:"total_timesteps"`
	Chunks         []struct {
		ChunkIndex    *int    `json:"chunk_index"`
		URI           string  `json:"uri"`
		TimestepRange []int64 `json:"timestep_range"`
		LengthT       *int64  `json:"length_T"`
		TotalChunks   *int    `json:"total_chunks"`
	} `json:"chunks"`
}

// plan lists the inputs and groups them into episodes: every manifest
// becomes a chunked episode at its own place in the order, the files its
// chunks name are read through it (and not again on their own), every
// other file is an episode of its own. Files are opened only to read their
// header, index and, for manifests, the manifest block; a file that cannot
// be opened as a container is still an episode, whose scan reports why.
func (s *Source) plan() ([]episodePlan, error) {
	_, rels, err := listInputs(s.root) // the base is New's: it depends on root alone
	if err != nil {
		return nil, err
	}
	plans := make([]episodePlan, 0, len(rels))
	chunkOf := map[string]bool{}
	for _, rel := range rels {
		p := episodePlan{rel: rel}
		m, err := s.readManifest(rel)
		if err != nil {
			return nil, err
		}
		if m != nil {
			p.manifest = m
			for _, c := range m.chunks {
				if c.rel != "" {
					chunkOf[c.rel] = true
				}
			}
		}
		plans = append(plans, p)
	}
	out := plans[:0]
	for _, p := range plans {
		if p.manifest == nil && chunkOf[p.rel] {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func (s *Source) abs(rel string) string { return filepath.Join(s.base, filepath.FromSlash(rel)) }

// readManifest returns the plan of rel when it is a manifest container, nil
// when it is anything else (or no container at all).
func (s *Source) readManifest(rel string) (*manifestPlan, error) {
	f, err := container.Open(s.abs(rel), rel, s.opts.Limits)
	if err != nil {
		if p := blockProblem(err); errors.As(p, new(*Problem)) {
			return nil, nil // not readable as a container: scanned (and reported) as an episode
		}
		return nil, fmt.Errorf("wshard: %s: %w", rel, err)
	}
	defer f.Close()
	if f.Header().Role != container.RoleManifest {
		return nil, nil
	}
	m := &manifestPlan{}
	entry, ok := f.Lookup("meta/manifest")
	if !ok {
		m.problem = problemf(validate.ReasonMissingBlock, rel, "manifest has no meta/manifest block")
		return m, nil
	}
	if entry.OrigSize > maxMetaBytes {
		m.problem = problemf(validate.ReasonBadSchema, rel, "meta/manifest is %d bytes, more than the %d a metadata block may have", entry.OrigSize, maxMetaBytes)
		return m, nil
	}
	raw, err := f.ReadBlock(entry)
	if err != nil {
		if p := blockProblem(err); errors.As(p, new(*Problem)) {
			m.problem = p
			return m, nil
		}
		return nil, err
	}
	return parseManifest(raw, rel), nil
}

// parseManifest reads the JSON of a manifest at rel. A manifest that is not
// valid JSON of the expected shape is a plan with a problem.
func parseManifest(raw []byte, rel string) *manifestPlan {
	m := &manifestPlan{}
	var mj manifestJSON
	if err := json.Unmarshal(raw, &mj); err != nil {
		m.problem = problemf(validate.ReasonBadSchema, rel, "meta/manifest: %v", err)
		return m
	}
	m.episodeID, m.envID, m.totalChunks, m.totalTimesteps = mj.EpisodeID, mj.EnvID, mj.TotalChunks, mj.TotalTimesteps
	dir := path.Dir(rel)
	for i, c := range mj.Chunks {
		cp := chunkPlan{index: i}
		if c.ChunkIndex != nil {
			cp.index = *c.ChunkIndex
		}
		if m.totalChunks == nil && c.TotalChunks != nil {
			m.totalChunks = c.TotalChunks
		}
		if uri := filepath.FromSlash(c.URI); filepath.IsLocal(uri) {
			cp.rel = path.Join(dir, filepath.ToSlash(filepath.Clean(uri)))
		} else {
			cp.problem = problemf(validate.ReasonPathEscape, rel, "chunk %d uri %q leaves the manifest's directory", cp.index, c.URI)
		}
		if c.LengthT != nil {
			var bad error
			r := c.TimestepRange
			switch {
			case *c.LengthT < 0 || *c.LengthT > maxSteps:
				bad = problemf(validate.ReasonBadSchema, rel, "chunk %d length_T %d out of range", cp.index, *c.LengthT)
			case r == nil:
			case len(r) != 2 || r[0] < 0 || r[0] > 1<<53 || (r[1]-r[0] != *c.LengthT && r[1]-r[0]+1 != *c.LengthT):
				bad = problemf(validate.ReasonLengthMismatch, rel, "chunk %d timestep_range %v disagrees with length_T %d", cp.index, r, *c.LengthT)
			default:
				cp.declared, cp.start, cp.length = true, r[0], *c.LengthT
			}
			if cp.problem == nil {
				cp.problem = bad
			}
		}
		m.chunks = append(m.chunks, cp)
	}
	// Chunks are read in chunk_index order; the manifest's own order breaks
	// ties, so that a repeated index shows up as an overlap, not as chaos.
	slices.SortStableFunc(m.chunks, func(a, b chunkPlan) int { return cmp.Compare(a.index, b.index) })
	return m
}
