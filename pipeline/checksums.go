package pipeline

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/warehouse"
)

// checksums returns the size and sha256 of every file under the version
// directory tmp except the shards (the manifest records theirs in
// shards[]), the manifest and its digest (not written yet), and the names
// in later (files the caller rewrites and hashes itself), hashed by the
// build's workers. Walking the directory rather than listing what the
// build meant to write keeps every published file covered
// (files.checksums, docs/format/manifest.md).
func (b *builder) checksums(ctx context.Context, tmp string, m *warehouse.Manifest, later ...string) (map[string]warehouse.FileChecksum, error) {
	skip := map[string]bool{warehouse.ManifestName: true, warehouse.ManifestDigestName: true}
	for _, s := range m.Shards {
		skip[s.RelativePath] = true
	}
	for _, name := range later {
		skip[name] = true
	}
	var names []string
	err := filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(tmp, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file: a version directory holds only files and directories", p)
		}
		if !skip[rel] {
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sums := make(map[string]warehouse.FileChecksum, len(names)+len(later))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.workers)
	for _, name := range names {
		g.Go(func() error {
			sum, err := warehouse.FileSHA256(gctx, filepath.Join(tmp, filepath.FromSlash(name)))
			if err != nil {
				return fmt.Errorf("checksum %s: %w", name, err)
			}
			mu.Lock()
			sums[name] = sum
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return sums, nil
}
