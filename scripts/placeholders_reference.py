"""The reference side of scripts/check-placeholders.sh.

  placeholders_reference.py generate DIR              writes the generated test images into DIR
  placeholders_reference.py compare JSONL DIR RUST    compares `vipsload thumb --json --placeholder`
                                                      lines with the reference encoders run on the
                                                      thumbnails in DIR

References: `blurhash` (PyPI, pure Python); `thumbhash` (PyPI, pure Python), and `thumbhash-rs`
(PyPI, PyO3 bindings to the `thumbhash` crate, Evan Wallace's own Rust port), run by the
interpreter RUST from its own venv, because both packages install a module named `thumbhash`.
`thumbhash` 0.1.2 cannot encode an image with alpha (an operator-precedence slip makes its alpha
channel a tuple, and it raises TypeError), so images with alpha are checked against the Rust
port alone.

The pure-Python ports compute in double precision, as the JavaScript reference does, and must
match exactly. The Rust port computes in single precision, so its AC terms can round one step
apart: against it the header bytes must match and every 4-bit AC term be within one step.
Channels without signal (a flat colour's AC terms are rounding noise, scaled to nothing when
decoded) differ arbitrarily between precisions; the generated images with alpha have signal
in every channel.

BlurHash has no alpha: VipsLoad flattens RGBA onto white first, as libvips' flatten does for
JPEG output (in sRGB, truncated to 8 bits), so the reference is given the same flattening.
ThumbHash reads RGBA as it is.
"""
import base64
import json
import math
import os
import random
import subprocess
import sys

import blurhash
import thumbhash
from PIL import Image, ImageDraw


def generate(folder):
    rng = random.Random(7)
    images = {}
    # A smooth gradient, landscape.
    gradient = Image.new("RGB", (640, 400))
    gradient.putdata([(x * 255 // 639, y * 255 // 399, 128) for y in range(400) for x in range(640)])
    images["gradient.png"] = gradient
    # Noise over a colour cast, portrait.
    noise = Image.new("RGB", (300, 700))
    noise.putdata([(rng.randrange(40, 256), rng.randrange(0, 120), rng.randrange(0, 200)) for _ in range(300 * 700)])
    images["noise.png"] = noise
    # Shapes on a dark ground, square, saved as JPEG (a lossy input).
    shapes = Image.new("RGB", (512, 512), (20, 30, 40))
    draw = ImageDraw.Draw(shapes)
    draw.ellipse((60, 60, 300, 300), fill=(250, 200, 30))
    draw.rectangle((280, 200, 480, 480), fill=(30, 160, 250))
    images["shapes.jpg"] = shapes
    # Alpha: a soft disc, its colour changing across it, on transparency.
    disc = Image.new("RGBA", (400, 300), (0, 0, 0, 0))
    pixels = []
    for y in range(300):
        for x in range(400):
            d = math.hypot(x - 200, y - 150) / 150
            pixels.append((x * 255 // 399, 40 + y // 2, 200 - x // 3, max(0, min(255, int(255 * (1.2 - d))))))
    disc.putdata(pixels)
    images["disc-alpha.png"] = disc
    # Alpha in bands, landscape 2:1 (the aspect where Python's round() and JavaScript's differ).
    bands = Image.new("RGBA", (200, 100))
    bands.putdata([(30 + x, 200 - y, 90, (x * 255 // 199) if y % 20 < 10 else 255) for y in range(100) for x in range(200)])
    images["bands-alpha.png"] = bands
    # Very wide and very tall: few components on the short side.
    images["wide.png"] = gradient.resize((1200, 90))
    images["tall.png"] = noise.resize((60, 900))
    # Flat colour: every AC term zero.
    images["flat.png"] = Image.new("RGB", (200, 150), (90, 140, 200))
    # Tiny: fewer pixels than components.
    images["tiny.png"] = gradient.resize((3, 2))
    for name, image in images.items():
        image.save(os.path.join(folder, name), quality=90) if name.endswith(".jpg") else image.save(
            os.path.join(folder, name))


def rgba_bytes(image):
    return image.tobytes("raw", "RGBA")


def reference(path, rust):
    """The reference BlurHash, pure-Python ThumbHash (None where it cannot encode) and Rust ThumbHash."""
    image = Image.open(path)
    image.load()
    rgba = image.convert("RGBA")
    width, height = rgba.size

    def flatten(pixel):
        r, g, b, a = pixel
        return [int(c * a / 255 + 255 * (255 - a) / 255) for c in (r, g, b)]

    rows = [[flatten(rgba.getpixel((x, y))) for x in range(width)] for y in range(height)]
    blur = blurhash.encode(rows, components_x=4, components_y=3)
    pixels = rgba_bytes(rgba)
    try:
        python = base64.b64encode(bytes(thumbhash.rgba_to_thumb_hash(width, height, list(pixels)))).decode("ascii")
    except TypeError:
        python = None
    script = (
        "import base64, sys, thumbhash; w, h = int(sys.argv[1]), int(sys.argv[2]); "
        "print(base64.b64encode(thumbhash.rgba_to_thumb_hash(w, h, sys.stdin.buffer.read())).decode())"
    )
    rust_hash = subprocess.run(
        [rust, "-c", script, str(width), str(height)], input=pixels, capture_output=True, check=True
    ).stdout.decode().strip()
    return blur, python, rust_hash


def close_to(ours, rust, header):
    """Whether two ThumbHashes (base64) have the same first `header` bytes and AC nibbles within one step."""
    a, b = base64.b64decode(ours), base64.b64decode(rust)
    if len(a) != len(b) or a[:header] != b[:header]:
        return False
    return all(abs((x >> s & 15) - (y >> s & 15)) <= 1 for x, y in zip(a[header:], b[header:]) for s in (0, 4))


def compare(jsonl, folder, rust):
    total = matched = 0
    failed = []
    with open(jsonl) as lines:
        for line in lines:
            record = json.loads(line)
            if "status" not in record or record.get("status") == "summary" or "input" not in record:
                continue
            if record["status"] != "written":
                failed.append(f"{record['input']}: {record['status']} {record.get('error', '')}")
                continue
            ours = record["placeholder"]
            blur, python, rust_hash = reference(os.path.join(folder, record["output"]), rust)
            total += 1
            blur_ok = ours["blurHash"] == blur
            header = 6 if base64.b64decode(ours["thumbHash"])[2] & 0x80 else 5
            near_rust = close_to(ours["thumbHash"], rust_hash, header)
            thumb_ok = python == ours["thumbHash"] if python else near_rust
            matched += blur_ok and thumb_ok
            name = os.path.basename(record["input"])

            def verdict(same):
                return "same" if same else "DIFFERENT"

            print(f"{name:24} {record['width']:>3}x{record['height']:<3} average {ours['averageColour']}")
            print(f"  blurhash  {ours['blurHash']:36} blurhash     {blur:36} {verdict(blur_ok)}")
            python_text = python or "(cannot encode alpha)"
            print(f"  thumbhash {ours['thumbHash']:36} thumbhash    {python_text:36} "
                  f"{verdict(python == ours['thumbHash']) if python else '-'}")
            rust_verdict = "same" if ours["thumbHash"] == rust_hash else ("within 1 step" if near_rust else "DIFFERENT")
            print(f"  {'':46} thumbhash-rs {rust_hash:36} {rust_verdict}")
    for line in failed:
        print(f"not written: {line}")
    print(f"{matched} of {total} images: BlurHash equal to the reference's; ThumbHash equal to the"
          " pure-Python reference's (Rust port, within one step, where it cannot encode alpha)")
    sys.exit(0 if total and matched == total and not failed else 1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["generate"]:
        generate(sys.argv[2])
    elif sys.argv[1:2] == ["compare"]:
        compare(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
