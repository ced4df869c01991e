#!/usr/bin/env bash
# Regenerates every roverd test file from scratch. Needs Go, Debian's
# python3-opencv and python3-numpy (through /usr/bin/python3), ffmpeg and
# xz-utils; the tests themselves only read the committed output.
#
#   apt-get install python3-opencv python3-numpy ffmpeg xz-utils
#   bash testdata/roverdgen/generate.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

# 1. The demo datasets: Go writes ts, meta.json and the IMU channels, then
#    OpenCV's MJPG VideoWriter writes each camera video.
rm -rf testdata/roverd
go run ./testdata/roverdgen -out testdata/roverd
/usr/bin/python3 testdata/roverdgen/make_video.py testdata/roverd/drive_2/camera/video.avi 64 48 12 60
/usr/bin/python3 testdata/roverdgen/make_video.py testdata/roverd/drive_10/camera/video.avi 64 48 8 160

# 2. AVI fixtures of the parser tests, written by FFmpeg's own command line:
#    a complete file, and one from an encoder killed with SIGKILL while
#    writing (-flush_packets 1 puts each frame on disk as it is written, so
#    the file ends wherever the kill lands: RIFF and movi sizes still the
#    0xFFFFFFFF placeholder, no idx1, usually a cut-off last frame). The
#    killed file differs from run to run; the tests derive what they expect
#    from its bytes.
avi=sources/roverd/avi/testdata
mkdir -p "$avi"
ffmpeg -y -hide_banner -loglevel error -f lavfi -i testsrc=size=32x24:rate=5 -frames:v 3 \
  -c:v mjpeg -q:v 5 "$avi/ffmpeg_mjpeg.avi"
rm -f "$avi/ffmpeg_killed.avi"
ffmpeg -hide_banner -loglevel error -re -f lavfi -i testsrc=size=32x24:rate=10 \
  -c:v mjpeg -q:v 5 -flush_packets 1 "$avi/ffmpeg_killed.avi" &
pid=$!
sleep 2.2
kill -9 "$pid"
wait "$pid" || true

# 3. .xz fixtures of the xzstream tests: liblzma through Python's lzma module
#    and the xz tool (multi-block streams).
xzd=sources/roverd/xzstream/testdata
/usr/bin/python3 testdata/roverdgen/xz_fixtures.py "$xzd"
plain() { /usr/bin/python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 7 + i // 251) % 256 for i in range(50000)))'; }
plain | xz -z -c -T1 --block-size=16KiB --check=crc64 > "$xzd/multiblock.xz"
plain | xz -z -c -T2 --block-size=16KiB --check=crc32 > "$xzd/multiblock_mt.xz"

# 4. .npz fixtures of the npz channel tests, written by numpy.
/usr/bin/python3 testdata/roverdgen/npz_fixtures.py sources/roverd/testdata/npz
