"""pyvips peer for Benchmarks/peers.py: thumbnails every file given with `pyvips.Image.thumbnail`.

    python pyvips_worker.py OUTDIR SIZE FILE...

`thumbnail` opens with shrink-on-load, fits into SIZE×SIZE and turns the image upright by its EXIF
orientation; each result is written to OUTDIR/<name>.jpg at quality 75, as vipsthumbnail does.
"""

import os
import sys

import pyvips


def main():
    out, size, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        thumb = pyvips.Image.thumbnail(path, size, height=size)
        thumb.write_to_file(os.path.join(out, stem + ".jpg[Q=75]"))


if __name__ == "__main__":
    main()
