#!/usr/bin/env python3
"""Compares VipsLoad with Pillow on Pillow's own test images (run by scripts/check-pillow-suite.sh).

For every file under IMAGES that Pillow decodes as one of the compared formats (BMP, DIB, ICO, CUR,
TGA, TIFF), the file is decoded by Pillow (full size, converted to RGBA) and by `vipsload thumb` into
a box of Pillow's size (never enlarged: the full size; for an icon, the entry of that size), written as
PNG. The two are compared premultiplied (a transparent pixel's colour does not count, as no renderer
shows it): "right" when the sizes match and no premultiplied channel differs by more than TOLERANCE
(default 2: the rounding of 5- and 6-bit channels and of premultiplication), "wrong" otherwise,
"refused" when vipsload fails. A CUR that Pillow reads without alpha is compared composited over
black: Pillow applies a cursor's AND mask only to 1-bit and grey cursors (it shows the masked pixels of
the others in their stored colour, black), VipsLoad applies it to every cursor.
Pillow's 16-bit grey modes are compared at 8 bits (the top 8 bits, as VipsLoad converts them; a TIFF's
12-bit samples scaled from their 12-bit range).

Then the whole folder goes through one `vipsload thumb` batch, which must end by itself (no crash, no
hang: a time limit) whatever the files are: Pillow's suite holds fuzz crashers, bombs and timeouts.
Prints per-format figures and every file that is not right; exits 1 when a target is missed.
"""
import argparse
import io
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from PIL import Image

# Pillow refuses images over twice this (its decompression-bomb check): VipsLoad's default limit.
Image.MAX_IMAGE_PIXELS = 50_000_000
warnings.simplefilter("ignore")
COMPARED = {"BMP": "BMP", "DIB": "BMP", "ICO": "ICO", "CUR": "CUR", "TGA": "TGA", "TIFF": "TIFF"}


def pillow_rgba(im):
    """Pillow's decode as an RGBA array, 16-bit modes at 8 bits."""
    if im.mode.startswith("I;16"):
        arr = np.asarray(im, dtype=np.uint32)
        # A TIFF's 12-bit (or other) samples in a 16-bit mode: scaled from their own range.
        bits = getattr(im, "tag_v2", {}).get(258, (16,))[0] if hasattr(im, "tag_v2") else 16
        if bits < 16:
            peak = (1 << bits) - 1
            grey = ((np.minimum(arr, peak) * 255 + peak // 2) // peak).astype(np.uint8)
        else:
            grey = (arr >> 8).astype(np.uint8)
        im = Image.fromarray(grey, "L")
    return np.asarray(im.convert("RGBA"), dtype=np.int16)


def premultiplied(rgba, over_black=False):
    alpha = rgba[..., 3:4]
    colour = (rgba[..., :3].astype(np.int32) * alpha + 127) // 255
    return colour if over_black else np.concatenate([colour, alpha.astype(np.int32)], axis=-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("images")
    parser.add_argument("vipsload")
    parser.add_argument("--tolerance", type=int, default=2)
    parser.add_argument("--batch-timeout", type=int, default=900)
    args = parser.parse_args()

    files = sorted(os.path.join(d, f) for d, _, names in os.walk(args.images) for f in names)
    figures = {}
    problems = []
    for path in files:
        try:
            with Image.open(path) as im:
                fmt = COMPARED.get(im.format or "")
                if fmt is None:
                    continue
                im.load()
                reference = pillow_rgba(im)
                pillow_alpha = "A" in im.mode or "transparency" in im.info
        except Exception:
            continue
        counts = figures.setdefault(fmt, {"pillow": 0, "right": 0, "wrong": 0, "refused": 0})
        counts["pillow"] += 1
        height, width = reference.shape[:2]
        name = os.path.relpath(path, args.images)
        run = subprocess.run(
            [args.vipsload, "thumb", "-q", "-s", f"{width}x{height}", "-f", "png", "-o", "-", path],
            capture_output=True, timeout=120)
        if run.returncode != 0 or not run.stdout:
            counts["refused"] += 1
            problems.append(f"refused {fmt} {name}: {run.stderr.decode(errors='replace').strip()[:200]}")
            continue
        ours = np.asarray(Image.open(io.BytesIO(run.stdout)).convert("RGBA"), dtype=np.int16)
        if ours.shape != reference.shape:
            counts["wrong"] += 1
            problems.append(f"wrong   {fmt} {name}: size {ours.shape[1]}x{ours.shape[0]}, Pillow {width}x{height}")
            continue
        over_black = fmt == "CUR" and not pillow_alpha
        diff = np.abs(premultiplied(ours, over_black) - premultiplied(reference, over_black))
        worst = int(diff.max()) if diff.size else 0
        if worst <= args.tolerance:
            counts["right"] += 1
        else:
            counts["wrong"] += 1
            share = float((diff > args.tolerance).mean()) * 100
            problems.append(f"wrong   {fmt} {name}: max difference {worst}, {share:.1f}% of samples over tolerance")

    for line in problems:
        print(line)
    print(f"\n{'format':6} {'pillow':>6} {'right':>6} {'wrong':>6} {'refused':>7}  right%")
    missed = False
    for fmt in ["BMP", "ICO", "CUR", "TGA", "TIFF"]:
        c = figures.get(fmt, {"pillow": 0, "right": 0, "wrong": 0, "refused": 0})
        share = 100.0 * c["right"] / c["pillow"] if c["pillow"] else 100.0
        print(f"{fmt:6} {c['pillow']:6} {c['right']:6} {c['wrong']:6} {c['refused']:7}  {share:5.1f}")
    together = [figures.get(f, {"pillow": 0, "right": 0}) for f in ["BMP", "ICO", "CUR", "TGA"]]
    pillow = sum(c["pillow"] for c in together)
    right = sum(c["right"] for c in together)
    share = 100.0 * right / pillow if pillow else 100.0
    print(f"BMP/ICO/CUR/TGA together: {right} of {pillow} right ({share:.1f}%; target 95%)")
    missed |= share < 95.0

    # The whole suite through one batch: it must come back by itself.
    with tempfile.TemporaryDirectory() as out:
        try:
            batch = subprocess.run(
                [args.vipsload, "thumb", "-q", "-o", out, "--", *files], capture_output=True,
                timeout=args.batch_timeout)
            crashed = batch.returncode < 0 or batch.returncode > 1
            written = len(os.listdir(out))
            print(f"batch of all {len(files)} files: exit {batch.returncode}, {written} outputs"
                  + (" (CRASHED)" if crashed else ""))
            missed |= crashed
        except subprocess.TimeoutExpired:
            print(f"batch of all {len(files)} files: did not finish in {args.batch_timeout} s (HANG)")
            missed = True
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
