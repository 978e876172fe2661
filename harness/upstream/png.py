"""A raster canvas written as PNG with the standard library alone (zlib, struct): lines, dots, boxes and text.

Why not plotly, which the harness already has: plotly writes PNG only through kaleido, which drives a Chrome it
downloads on first use, and this report must be written offline (matplotlib is not a dependency; Pillow would be a
new one for one picture). A chart of dots and two levels needs none of them: an RGB canvas, Bresenham's lines and a
5x7 bitmap font (:mod:`harness.upstream.font`). The bytes are deterministic, so a test can decode them back.
"""

from __future__ import annotations

import struct
import zlib

from harness.upstream.font import GLYPH_H, GLYPH_W, glyph

__all__ = ["Canvas", "Color"]

Color = tuple[int, int, int]


class Canvas:
    def __init__(self, width: int, height: int, background: Color = (255, 255, 255)) -> None:
        self.width, self.height = width, height
        self._rows = [bytearray(bytes(background) * width) for _ in range(height)]

    def pixel(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            self._rows[y][3 * x:3 * x + 3] = bytes(color)

    def get(self, x: int, y: int) -> Color:
        r, g, b = self._rows[y][3 * x:3 * x + 3]
        return (r, g, b)

    def box(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """A filled rectangle, corners included."""
        for y in range(max(0, min(y0, y1)), min(self.height, max(y0, y1) + 1)):
            for x in range(max(0, min(x0, x1)), min(self.width, max(x0, x1) + 1)):
                self.pixel(x, y, color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color, *, dash: int = 0) -> None:
        """Bresenham's line; ``dash`` > 0 draws ``dash`` pixels on, ``dash`` off."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err, n = dx + dy, 0
        while True:
            if not dash or (n // dash) % 2 == 0:
                self.pixel(x0, y0, color)
            n += 1
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def dot(self, x: int, y: int, color: Color, radius: int = 2) -> None:
        for oy in range(-radius, radius + 1):
            for ox in range(-radius, radius + 1):
                if ox * ox + oy * oy <= radius * radius + 1:
                    self.pixel(x + ox, y + oy, color)

    def text(self, x: int, y: int, text: str, color: Color, scale: int = 1) -> int:
        """``text`` with its top-left corner at (x, y); returns the x after it."""
        for ch in text:
            rows = glyph(ch)
            for gy, bits in enumerate(rows):
                for gx in range(GLYPH_W):
                    if bits >> (GLYPH_W - 1 - gx) & 1:
                        self.box(x + gx * scale, y + gy * scale, x + gx * scale + scale - 1,
                                 y + gy * scale + scale - 1, color)
            x += (GLYPH_W + 1) * scale
        return x

    @staticmethod
    def text_width(text: str, scale: int = 1) -> int:
        return len(text) * (GLYPH_W + 1) * scale - scale if text else 0

    @staticmethod
    def text_height(scale: int = 1) -> int:
        return GLYPH_H * scale

    def png(self) -> bytes:
        """The canvas as a PNG: 8-bit RGB, no interlace, filter 0 on every row."""
        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        raw = b"".join(b"\x00" + bytes(row) for row in self._rows)
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
                + chunk(b"IEND", b""))
