package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"

	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/warehouse"
)

// ShardSumsName is the version file that records each shard's image
// statistics sums (docs/format/manifest.md, "shard_sums.json"): the exact
// fixed-point sums that image_stats is the quotient of, per shard. A
// rebuild that takes a whole shard from a version (reuse_link.go) adds
// them instead of reading the shard's images again. It is listed in
// files.checksums only, so readers that do not know it are not troubled.
const ShardSumsName = "shard_sums.json"

const shardSumsFormat = 1

// maxShardSumsBytes bounds the file read back (about 250 bytes a shard).
const maxShardSumsBytes = 64 << 20

type shardSumsEntry struct {
	ID   string    `json:"id"`
	Sums imageSums `json:"sums"`
}

type shardSumsFile struct {
	Format     int              `json:"format"`
	FixedShift int              `json:"fixed_point_shift"`
	Shards     []shardSumsEntry `json:"shards"`
}

// writeShardSums writes shard_sums.json into the version directory tmp.
func writeShardSums(tmp string, shards []shardSumsEntry) error {
	if shards == nil {
		shards = []shardSumsEntry{}
	}
	raw, err := json.Marshal(shardSumsFile{Format: shardSumsFormat, FixedShift: fixedShift, Shards: shards})
	if err != nil {
		return err
	}
	return atomicfile.WriteSynced(filepath.Join(tmp, ShardSumsName), append(raw, '\n'))
}

// readShardSums reads the shard sums of the version pinned in rs whose
// manifest is m, checked against the sha256 files.checksums records, by
// shard id; nil and no error when the version has none (built before
// they were recorded).
func readShardSums(rs *reuseSource, m *warehouse.Manifest) (map[string]imageSums, error) {
	want, ok := m.Files.Checksums[ShardSumsName]
	if !ok {
		return nil, nil
	}
	f, err := rs.pin.Root().Open(ShardSumsName)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := readAllCapped(f, maxShardSumsBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ShardSumsName, err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != want.SHA256 {
		return nil, fmt.Errorf("%s: sha256 %x, the manifest records %s", ShardSumsName, sum, want.SHA256)
	}
	var file shardSumsFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("%s: %w", ShardSumsName, err)
	}
	if file.Format != shardSumsFormat || file.FixedShift != fixedShift {
		return nil, fmt.Errorf("%s: format %d with fixed_point_shift %d, this build reads %d with %d",
			ShardSumsName, file.Format, file.FixedShift, shardSumsFormat, fixedShift)
	}
	out := make(map[string]imageSums, len(file.Shards))
	for _, e := range file.Shards {
		if _, dup := out[e.ID]; dup || e.Sums.n < 0 {
			return nil, fmt.Errorf("%s: shard %q: repeated, or %d values", ShardSumsName, e.ID, e.Sums.n)
		}
		out[e.ID] = e.Sums
	}
	return out, nil
}
