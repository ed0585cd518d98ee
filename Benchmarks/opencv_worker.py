"""OpenCV peer for Benchmarks/peers.py: thumbnails every file given, as a batch OpenCV user writes it.

    python opencv_worker.py OUTDIR SIZE FILE...

One thread (`cv2.setNumThreads(1)`: one process per core is the parallelism). For each file the
header's size picks the largest `cv2.IMREAD_REDUCED_COLOR_2/4/8` whose result still covers SIZE
(libjpeg's DCT scaling for JPEG), `cv2.imread` decodes (turning it upright by EXIF orientation),
`cv2.resize` with INTER_AREA fits it into SIZE×SIZE, and `cv2.imwrite` writes OUTDIR/<name>.jpg
at quality 75.
"""

import os
import struct
import sys

import cv2

REDUCED = [(8, cv2.IMREAD_REDUCED_COLOR_8), (4, cv2.IMREAD_REDUCED_COLOR_4), (2, cv2.IMREAD_REDUCED_COLOR_2)]


def header_size(path):
    """(width, height) from a JPEG SOF, PNG IHDR or WebP header, or None (then no reduced read)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head.startswith(b"\x89PNG\r\n\x1a\n"):
            return struct.unpack(">II", head[16:24])
        if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
            chunk = head[12:16]
            if chunk == b"VP8 ":
                w, h = struct.unpack("<HH", head[26:30])
                return w & 0x3FFF, h & 0x3FFF
            if chunk == b"VP8L":
                bits = int.from_bytes(head[21:25], "little")
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8X":
                return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1
            return None
        if not head.startswith(b"\xff\xd8"):
            return None
        f.seek(2)
        while True:
            marker = f.read(2)
            if len(marker) < 2 or marker[0] != 0xFF:
                return None
            length = int.from_bytes(f.read(2), "big")
            if marker[1] in (0xC0, 0xC1, 0xC2):
                segment = f.read(5)
                return int.from_bytes(segment[3:5], "big"), int.from_bytes(segment[1:3], "big")
            f.seek(length - 2, os.SEEK_CUR)


def main():
    cv2.setNumThreads(1)
    out, size, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    params = [cv2.IMWRITE_JPEG_QUALITY, 75]
    for path in files:
        flag = cv2.IMREAD_COLOR
        dims = header_size(path)
        if dims:
            longest = max(dims)
            for factor, reduced in REDUCED:
                if longest // factor >= size:
                    flag = reduced
                    break
        image = cv2.imread(path, flag)
        if image is None:
            raise SystemExit(f"{path}: OpenCV cannot read it")
        height, width = image.shape[:2]
        scale = size / max(width, height)
        if scale < 1:
            image = cv2.resize(image, (max(1, round(width * scale)), max(1, round(height * scale))),
                               interpolation=cv2.INTER_AREA)
        stem = os.path.splitext(os.path.basename(path))[0]
        cv2.imwrite(os.path.join(out, stem + ".jpg"), image, params)


if __name__ == "__main__":
    main()
