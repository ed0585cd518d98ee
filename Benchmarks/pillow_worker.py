"""Pillow peer for Benchmarks/peers.py: thumbnails every file given, as a careful Pillow user would.

    python pillow_worker.py OUTDIR SIZE FILE...

Each file is decoded, fitted into SIZE×SIZE, turned upright by its EXIF orientation and written to
OUTDIR/<name>.jpg at quality 75 (Pillow's default, and libvips'). For JPEG, `draft()` is asked for the
thumbnail's own fitted size, so libjpeg's DCT scaling does the most it can: Pillow at its best.
"""

import os
import sys

from PIL import Image, ImageOps


def fitted(width, height, size):
    """The size of a width×height image fitted into size×size, aspect kept (never below 1 px)."""
    scale = size / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def main():
    out, size, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        with Image.open(path) as im:
            if im.format == "JPEG":
                im.draft("RGB", fitted(*im.size, size))
            # The box is square, so fitting before turning upright gives the same size, and the
            # transpose works on the small image instead of a copy of the large one.
            im.thumbnail((size, size))
            ImageOps.exif_transpose(im, in_place=True)
            if im.mode != "RGB":
                im = im.convert("RGB")
            im.save(os.path.join(out, stem + ".jpg"), "JPEG", quality=75)


if __name__ == "__main__":
    main()
