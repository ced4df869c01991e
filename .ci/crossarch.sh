#!/usr/bin/env bash
# Cross-architecture check (run by .ci/run; needs qemu-user): the static
# CLI built for arm64 (CGO_ENABLED=0) and run under qemu-aarch64 must write,
# for every demo config in configs/, the same version ids, byte-identical
# shards, manifest (less created_at_ms and the files.checksums entries of
# build_report.json, build.parquet and runs.parquet, which carry timings or
# created_at_ms), samples.jsonl, fingerprint.jsonl and Parquet exports (less
# build.parquet and build_report.json: timings) as the amd64 build; and the arm64 test binaries of transforms, shard, pipeline and
# sources must pass under qemu (-short).
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
cleanup() { rm -rf "$work" configs/.crossarch-*.jsonc out/crossarch; }
trap cleanup EXIT

for arch in amd64 arm64; do
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -o "$work/warehouse-etl-$arch" ./cmd/warehouse-etl
done
qemu-aarch64 "$work/warehouse-etl-arm64" version | grep -qx 'binary: static' ||
  { echo "crossarch: the arm64 CGO_ENABLED=0 binary does not say it is static" >&2; exit 1; }

# Strip created_at_ms and the checksums of the three files that carry it or
# the timings: the manifest values that are not a function of the config and
# inputs (docs/format/manifest.md). An entry is three lines and its "},".
manifest_sans_time() {
  grep -v '"created_at_ms":' "$1" |
    sed -E '/^ *"(build_report\.json|build\.parquet|runs\.parquet)": \{$/,/^ *\},?$/d'
}

status=0
for cfg in configs/*.jsonc; do
  name=$(basename "$cfg" .jsonc)
  declare -A dir=()
  for arch in amd64 arm64; do
    # Same directory as the original, so relative roots resolve the same and
    # dataset_root (part of the version) is the same; only output_root moves.
    copy=configs/.crossarch-$arch-$name.jsonc
    sed "s|\"output_root\": *\"[^\"]*\"|\"output_root\": \"../out/crossarch/$arch/$name\"|" "$cfg" >"$copy"
    grep -q "out/crossarch/$arch/$name" "$copy" || { echo "crossarch: no output_root in $cfg" >&2; exit 1; }
    run=("$work/warehouse-etl-$arch")
    [ "$arch" = arm64 ] && run=(qemu-aarch64 "${run[@]}")
    dir[$arch]=$("${run[@]}" build --config "$copy" --quiet --workers 2 2>"$work/build-$arch-$name.log") ||
      { cat "$work/build-$arch-$name.log" >&2; exit 1; }
  done
  a=${dir[amd64]} b=${dir[arm64]} bad=0
  if [ "$(basename "$a")" != "$(basename "$b")" ]; then
    echo "crossarch: $name: version $(basename "$a") on amd64, $(basename "$b") on arm64" >&2; status=1; continue
  fi
  diff <(manifest_sans_time "$a/manifest.json") <(manifest_sans_time "$b/manifest.json") >&2 ||
    { echo "crossarch: $name: manifest.json differs (above)" >&2; bad=1; }
  # runs.parquet carries the manifest's created_at_ms: compare the two
  # architectures' exports of one version (the amd64 build's) instead.
  for arch in amd64 arm64; do
    cp -r "$a" "$work/export-$arch-$name"
    run=("$work/warehouse-etl-$arch")
    [ "$arch" = arm64 ] && run=(qemu-aarch64 "${run[@]}")
    # The manifest records the exports' sha256: an export that would
    # write different bytes refuses (the same failure as the cmp below).
    "${run[@]}" export parquet --tensor-warehouse "$work/export-$arch-$name" >/dev/null 2>"$work/export-$arch-$name.log" ||
      { echo "crossarch: $name: export parquet on $arch:" >&2; cat "$work/export-$arch-$name.log" >&2; bad=1; }
  done
  cmp -s "$work/export-amd64-$name/runs.parquet" "$work/export-arm64-$name/runs.parquet" ||
    { echo "crossarch: $name: export parquet writes a different runs.parquet on arm64" >&2; bad=1; }
  for f in shards/*.twh samples.jsonl fingerprint.jsonl samples.parquet; do
    for x in "$a"/$f; do
      rel=${x#"$a"/}
      cmp -s "$x" "$b/$rel" || { echo "crossarch: $name: $rel differs between amd64 and arm64" >&2; bad=1; }
    done
  done
  [ $bad = 0 ] || { status=1; continue; }
  echo "crossarch: $name: $(basename "$a") identical on amd64 and arm64 ($(ls "$a"/shards | wc -l) shards)"
done
[ $status = 0 ] || exit 1

[ -n "${CROSSARCH_NO_TESTS:-}" ] || GOARCH=arm64 CGO_ENABLED=0 go test -exec qemu-aarch64 -short ./transforms/... ./shard/... ./pipeline/... ./sources/...
