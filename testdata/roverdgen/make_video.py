"""Writes a roverd camera video the way roverd's collector does: OpenCV's
cv2.VideoWriter with the MJPG fourcc (Debian's python3-opencv, which writes
through FFmpeg's AVI muxer).

    /usr/bin/python3 testdata/roverdgen/make_video.py OUT.avi WIDTH HEIGHT FRAMES BLUE

Frame k is a solid RGB background (20 + 15k, 200 - 10k, BLUE) with a white
8x8 square at x = 4k, y = 4: tests check the decoded background colour to
tell frames apart and to prove the channel order (the reference reader
flips OpenCV's BGR to RGB; a plain JPEG decoder yields RGB directly).
"""
import sys

import cv2
import numpy as np


def frame(k, width, height, blue):
    rgb = np.zeros((height, width, 3), np.uint8)
    rgb[:, :] = (20 + 15 * k, 200 - 10 * k, blue)
    rgb[4:12, 4 * k:4 * k + 8] = 255
    return rgb


def main(out, width, height, frames, blue):
    fourcc = cv2.VideoWriter_fourcc(*"MJPG")
    writer = cv2.VideoWriter(out, fourcc, 10.0, (width, height))
    if not writer.isOpened():
        sys.exit("cannot open a MJPG writer for " + out)
    for k in range(frames):
        # VideoWriter takes BGR, as in roverd's VideoChannel.consume.
        writer.write(cv2.cvtColor(frame(k, width, height, blue), cv2.COLOR_RGB2BGR))
    writer.release()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
