#!/usr/bin/env python3
"""Renders the OCR test and benchmark images: PNG pages of printed text with known lines.

Each image is black text on white, one to four lines of short common English words and
digits, in Pillow's built-in scalable font at one size per image, between 640 and 1280
pixels wide. `truth.json` maps each file name to its lines, top to bottom, and the box
each line was drawn in (x1, y1, x2, y2 in pixels, from Pillow's own text measurement).

The pages are fixed (no randomness), so every run writes the same bytes for one Pillow
version; scripts/setup.sh pins that version. Written only when missing or different, so
running it again is cheap and leaves the files' times alone.

Usage: make_text_images.py OUT_DIR
"""

import io
import json
import os
import sys

from PIL import Image, ImageDraw, ImageFont

# (width, height, font size, lines). Sizes keep every line's glyphs at least ~14 pixels tall
# once the page is squeezed to the detector's 640x640, and lines well apart.
PAGES = [
    (640, 240, 40, ["hello world"]),
    (800, 320, 44, ["open the door", "at 7 pm"]),
    (960, 400, 40, ["the quick brown fox", "jumps over 12 dogs"]),
    (1024, 520, 40, ["order 4521 shipped", "call 555 0199", "thank you"]),
    (720, 300, 48, ["good morning", "room 204"]),
    (1280, 640, 48, ["total price 38 dollars", "paid in cash", "see you soon"]),
    (880, 560, 40, ["line one", "line two", "line three", "line four"]),
    (1120, 420, 52, ["welcome home", "since 1998"]),
    (640, 360, 36, ["stop", "exit 3", "keep left"]),
    (1200, 480, 44, ["meeting at noon on friday", "bring 2 copies"]),
    (960, 640, 42, ["red green blue", "one two three", "apple 64", "water 100"]),
    (768, 256, 46, ["book 17 is open"]),
]


def render(width, height, size, lines):
    """One page: PNG bytes and each line's drawn box."""
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=size)
    step = height // (len(lines) + 1)
    boxes = []
    for i, text in enumerate(lines):
        x, y = width // 12 + 7 * i, step * (i + 1) - size // 2
        draw.text((x, y), text, fill="black", font=font)
        boxes.append(list(draw.textbbox((x, y), text, font=font)))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue(), boxes


def write_if_changed(path, data):
    """Writes `data` to `path` atomically unless it already holds exactly that."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except FileNotFoundError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return True


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    truth = {}
    written = 0
    for i, (width, height, size, lines) in enumerate(PAGES):
        name = f"text_{i:02}.png"
        png, boxes = render(width, height, size, lines)
        written += write_if_changed(os.path.join(out, name), png)
        truth[name] = {"width": width, "height": height, "lines": lines, "boxes": boxes}
    data = (json.dumps(truth, indent=1, sort_keys=True) + "\n").encode()
    written += write_if_changed(os.path.join(out, "truth.json"), data)
    print(f"{len(PAGES)} text images in {out} ({written} file(s) written)")


if __name__ == "__main__":
    main()
