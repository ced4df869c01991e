#!/usr/bin/python3
"""Make a benchmark dataset of capture runs with ImageMagick.

    gen_dataset.py --root DIR --format jpeg|png --runs 3 --frames 100

Layout (../shared/formats/capture-runs.md):

    DIR/run_<n>/images/frame_00000.<ext>
    DIR/run_<n>/labels/frame_00000.json

Each run is a slow pan across its own plasma-fractal "scene" (smooth
structure at every scale, like a camera view), with two moving objects
(a disc and a rectangle, the labelled boxes) and Gaussian sensor noise on
every frame, so no two frames are alike and the encoders see camera-like
entropy:

    jpeg: 1920x1080, quality 90, 4:2:0 chroma subsampling (the common camera
          and OpenCV default)
    png:  1280x720 RGBA, 8 bits per channel (the capture tool's native format),
          ImageMagick's default compression (zlib level 7, adaptive filters)

The script is deterministic for a given ImageMagick build (fixed -seed), and
skips frames that already exist, so an interrupted run resumes.
"""

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

SIZES = {"jpeg": (1920, 1080), "png": (1280, 720)}
EXT = {"jpeg": "jpg", "png": "png"}
BATCH = 10  # frames per convert call: amortizes ImageMagick's start-up


def scene(root, fmt, run, w, h):
    """The run's scene: a plasma fractal larger than a frame, cached as MPC."""
    path = os.path.join(root, ".scenes", f"{fmt}-run{run}.mpc")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        subprocess.run(["convert", "-seed", str(1000 + run), "-size", f"{w + 480}x{h + 270}",
                        "plasma:fractal", "-blur", "0x2", path], check=True)
    return path


def objects(frame, w, h):
    """Two objects moving across the frame: (kind, color, box in pixels)."""
    t = frame / 100.0
    r = h // 10
    cx, cy = int(w * (0.15 + 0.7 * t)), int(h * (0.3 + 0.2 * t))
    disc = ("circle", "rgb(210,50,40)", (cx - r, cy - r, cx + r, cy + r))
    rw, rh = w // 8, h // 7
    x0, y0 = int(w * (0.8 - 0.6 * t)), int(h * 0.6)
    rect = ("rectangle", "rgb(30,40,200)", (x0, y0, x0 + rw, y0 + rh))
    return [disc, rect]


def frame_args(fmt, frame, w, h, out):
    # Pan 4 px right and 2 px down per frame, wrapping inside the scene.
    ox, oy = (4 * frame) % 480, (2 * frame) % 270
    args = ["(", "+clone", "-crop", f"{w}x{h}+{ox}+{oy}", "+repage"]
    for kind, color, (x0, y0, x1, y1) in objects(frame, w, h):
        if kind == "circle":
            cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
            args += ["-fill", color, "-draw", f"circle {cx},{cy} {x1},{cy}"]
        else:
            args += ["-fill", color, "-draw", f"rectangle {x0},{y0} {x1 - 1},{y1 - 1}"]
    args += ["-seed", str(frame + 1), "-attenuate", "0.25", "+noise", "Gaussian"]
    if fmt == "jpeg":
        args += ["-quality", "90", "-sampling-factor", "4:2:0", "-write", "JPEG:" + out]
    else:
        args += ["-alpha", "set", "-write", "PNG32:" + out]
    return args + ["+delete", ")"]


def label(fmt, run, frame, w, h):
    boxes = []
    for _, _, (x0, y0, x1, y1) in objects(frame, w, h):
        x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
        boxes.append({"bbox_px": [x0, y0, x1, y1],
                      "bbox_norm": [x0 / w, y0 / h, x1 / w, y1 / h]})
    return {"frame_id": frame, "sim_time": frame * 0.05,
            "unix_time": 1700000000.0 + run * 1000 + frame * 0.05,
            "image": f"images/frame_{frame:05d}.{EXT[fmt]}",
            "image_present": True, "camera_active": True, "polyp_labels": boxes}


def make_run(root, fmt, run, frames):
    w, h = SIZES[fmt]
    run_dir = os.path.join(root, f"run_{run}")
    os.makedirs(os.path.join(run_dir, "images"), exist_ok=True)
    os.makedirs(os.path.join(run_dir, "labels"), exist_ok=True)
    src = scene(root, fmt, run, w, h)
    todo = [f for f in range(frames)
            if not os.path.exists(os.path.join(run_dir, "images", f"frame_{f:05d}.{EXT[fmt]}"))]
    for i in range(0, len(todo), BATCH):
        args = ["convert", src]
        for f in todo[i:i + BATCH]:
            out = os.path.join(run_dir, "images", f"frame_{f:05d}.{EXT[fmt]}.tmp")
            args += frame_args(fmt, f, w, h, out)
        subprocess.run(args + ["null:"], check=True)
        for f in todo[i:i + BATCH]:
            final = os.path.join(run_dir, "images", f"frame_{f:05d}.{EXT[fmt]}")
            os.replace(final + ".tmp", final)
    for f in range(frames):
        # Rewrite a label only when it changes: an unchanged dataset keeps its
        # mtimes, so a warehouse built from it stays up to date.
        path = os.path.join(run_dir, "labels", f"frame_{f:05d}.json")
        text = json.dumps(label(fmt, run, f, w, h))
        if os.path.exists(path):
            with open(path) as fh:
                if fh.read() == text:
                    continue
        with open(path, "w") as fh:
            fh.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("--format", choices=sorted(SIZES), required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--frames", type=int, default=100, help="frames per run")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    with ThreadPoolExecutor(a.jobs) as ex:
        for f in [ex.submit(make_run, a.root, a.format, r, a.frames) for r in range(1, a.runs + 1)]:
            f.result()


if __name__ == "__main__":
    sys.exit(main())
