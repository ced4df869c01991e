#!/usr/bin/python3
"""Drop files from the page cache, for bench/read.sh's cold epochs:
posix_fadvise(POSIX_FADV_DONTNEED) on each file named (or each file under a
directory named), after an fdatasync so that no dirty page is kept. Pages
that another process has mapped stay cached; the readers timed cold map
nothing they have not read themselves in the same epoch.

    evict.py DIR_OR_FILE...
"""

import os
import sys


def files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                for n in sorted(names):
                    yield os.path.join(root, n)
        else:
            yield p


def evict(paths):
    """Drop every file of paths from the page cache; returns how many."""
    n = 0
    for path in files(paths):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        n += 1
    return n


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if evict(sys.argv[1:]) == 0:
        sys.exit("evict.py: no files")


if __name__ == "__main__":
    main()
