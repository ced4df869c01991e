// Package zarr writes a warehouse version as a Zarr v3 store
// (docs/format/zarr.md): a root group carrying the manifest, and one array
// per tensor and per metadata field whose first dimension is the sample.
// Every array uses the sharding_indexed codec (ZEP 2) with one inner chunk
// per sample and, by default, one Zarr shard per warehouse shard:
//
//	<store>/zarr.json            group; attributes: warehouse (the manifest), zarr_export
//	<store>/<array>/zarr.json    array metadata
//	<store>/<array>/c/<j>/0/...  shard j: inner chunks, then the index (u64 offset,
//	                             nbytes pairs, 2^64-1 for empty chunks, crc32c)
//
// Uncompressed inner chunks of images, boxes and masks are the TWH1 shard's
// bytes as they are, so an export copies them file to file; zstd is
// optional per store.
//
// Write produces the store from a manifest and its shards (a build calls it
// before publishing); Export is the CLI's path: verify the version, take its
// lock, then Write. Both write beside the target and rename, and replace an
// existing store only once the new one is complete.
package zarr
