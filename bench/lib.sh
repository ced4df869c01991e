# Shared by the bench scripts (source it): the build config they read.

# capture_config FILE ROOT SIZE DTYPE COMPACT OUTPUT_ROOT [EXTRA]: write to FILE
# the letterbox build config of a capture source at ROOT (SIZE x SIZE, DTYPE,
# compact_images COMPACT, 16 boxes, shards of SHARD_MB (default 64) MB) whose
# output root is OUTPUT_ROOT. EXTRA: more members, each line ending in a comma
# (e.g. '"pad_value": 114,').
capture_config() {
  local file=$1 root=$2 size=$3 dtype=$4 compact=$5 out=$6 extra=${7:-}
  cat >"$file" <<CFG
{
  "source": {"kind": "capture", "root": "$root"},
  "target_size": [$size, $size],
  "resize_mode": "letterbox",
  "dtype": "$dtype",
  "compact_images": $compact,
  "max_boxes": 16,
  "shard_target_mb": ${SHARD_MB:-64},${extra:+
  $extra}
  "output_root": "$out"
}
CFG
}
