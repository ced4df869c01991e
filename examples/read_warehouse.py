#!/usr/bin/python3
"""Read a warehouse version with numpy alone, from docs/format/*.md.

usage: read_warehouse.py VERSION_DIR   -> prints one JSON line per kept sample
"""
import json, math, sys
import numpy as np

root = sys.argv[1]
m = json.load(open(f"{root}/manifest.json"))
for s in m["shards"]:
    n, c, h, w, k = s["samples"], s["channels"], s["height"], s["width"], s["max_boxes"]
    dt = np.dtype("<f2") if s["dtype"] == "F16" else np.dtype("<f4")
    raw = np.memmap(f"{root}/{s['relative_path']}", dtype=np.uint8, mode="r")
    hdr = np.frombuffer(raw[:80], dtype="<u8", offset=32)  # samples, image/boxes/mask/meta/checksum offsets
    assert bytes(raw[:4]) == b"TWH1" and hdr[0] == n, "not the shard the manifest describes"
    images = np.frombuffer(raw, dt, n * c * h * w, int(hdr[1])).reshape(n, c, h, w)
    boxes = np.frombuffer(raw, dt, n * k * 4, int(hdr[2])).reshape(n, k, 4)
    mask = np.frombuffer(raw, dt, n * k, int(hdr[3])).reshape(n, k)
    meta_off = int(hdr[4])
    rec_size = int(np.frombuffer(raw, "<u4", 1, meta_off + 8)[0])
    rec = np.dtype({"names": ["frame_id", "input_seq", "src_width", "src_height", "class_index"],
                    "formats": ["<u8", "<u8", "<u4", "<u4", ("<i4", k)],
                    "offsets": [8, 16, 40, 44, 80], "itemsize": rec_size})
    meta = np.frombuffer(raw, rec, n, meta_off + 24)
    for i in range(n):
        print(json.dumps({
            "shard": s["id"], "index": i,
            "image_sum": math.fsum(images[i].astype(np.float64).ravel()),
            "pixel_0_0": [float(images[i, ch, 0, 0]) for ch in range(c)],
            "pixel_mid": [float(images[i, ch, h // 2, w // 2]) for ch in range(c)],
            "boxes": boxes[i].astype(np.float64).tolist(), "mask": mask[i].astype(np.float64).tolist(),
            "frame_id": int(meta[i]["frame_id"]), "input_seq": int(meta[i]["input_seq"]),
            "src_size": [int(meta[i]["src_width"]), int(meta[i]["src_height"])],
            "class_index": meta[i]["class_index"].tolist()}))
