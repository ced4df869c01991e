"""Writes the .xz fixtures of sources/roverd/xzstream/testdata with liblzma,
the library roverd's Python writer uses (through the lzma module).

    /usr/bin/python3 testdata/roverdgen/xz_fixtures.py sources/roverd/xzstream/testdata

The plain bytes are a formula the Go tests recompute: byte i of plain(n) is
(i * 7 + i // 251) % 256.
"""
import lzma
import os
import sys


def plain(n):
    return bytes((i * 7 + i // 251) % 256 for i in range(n))


def main(out):
    os.makedirs(out, exist_ok=True)

    def write(name, data):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)

    data = plain(20000)
    write("crc64.xz", lzma.compress(data))  # Python's default: CRC64, preset 6
    write("crc32.xz", lzma.compress(data, check=lzma.CHECK_CRC32))
    write("sha256.xz", lzma.compress(data, check=lzma.CHECK_SHA256))
    write("none.xz", lzma.compress(data, check=lzma.CHECK_NONE))
    # Preset 9e declares a 64 MiB dictionary for 20000 bytes.
    write("preset9e.xz", lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    write("empty.xz", lzma.compress(b""))
    # Two streams with four bytes of stream padding between them.
    write("concat.xz", lzma.compress(plain(300)) + b"\0\0\0\0" + lzma.compress(plain(700)))
    # A BCJ filter before LZMA2: valid .xz, not supported.
    write("x86.xz", lzma.compress(data, filters=[{"id": lzma.FILTER_X86}, {"id": lzma.FILTER_LZMA2}]))
    # A bomb: 64 MiB of zeros in about 10 KiB.
    write("zeros64m.xz", lzma.compress(bytes(64 << 20)))


if __name__ == "__main__":
    main(sys.argv[1])
