"""Writes the .npz fixtures of the npz channel tests with numpy, the writer
roverd's NPZBlobChannel uses (np.savez / np.savez_compressed, key "data").

    /usr/bin/python3 testdata/roverdgen/npz_fixtures.py sources/roverd/testdata/npz

vec/ and vecz/ hold records 000000.npz..000002.npz of f4 [3] with record i
= (i + 0.5, i + 1.5, i + 2.5), stored and deflated; img/000000.npz is u1
[4, 5, 3] with pixel (y, x, c) = 10y + 3x + c; bad/ holds arrays no reader
should accept as roverd records.
"""
import os
import sys

import numpy as np


def main(out):
    for sub in ("vec", "vecz", "img", "bad"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    for i in range(3):
        rec = np.array([i + 0.5, i + 1.5, i + 2.5], dtype="<f4")
        np.savez(os.path.join(out, "vec", f"{i:06d}.npz"), data=rec)
        np.savez_compressed(os.path.join(out, "vecz", f"{i:06d}.npz"), data=rec)
    y, x, c = np.meshgrid(np.arange(4), np.arange(5), np.arange(3), indexing="ij")
    np.savez(os.path.join(out, "img", "000000.npz"), data=(10 * y + 3 * x + c).astype("u1"))
    bad = os.path.join(out, "bad")
    np.savez(os.path.join(bad, "bigendian.npz"), data=np.array([1, 2, 3], dtype=">f4"))
    np.savez(os.path.join(bad, "fortran.npz"), data=np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
    np.savez(os.path.join(bad, "object.npz"), data=np.array([{"a": 1}], dtype=object))
    np.savez(os.path.join(bad, "nodata.npz"), other=np.array([1, 2, 3], dtype="<f4"))
    np.savez(os.path.join(bad, "shape.npz"), data=np.array([1, 2], dtype="<f4"))


if __name__ == "__main__":
    main(sys.argv[1])
