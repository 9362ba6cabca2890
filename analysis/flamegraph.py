"""A flame graph as plain SVG, drawn from folded stacks (one line per call
path, root first: "a;b;c weight", the format Brendan Gregg's flamegraph.pl
and speedscope read), for the HTML report's profiles (analysis/profile.py).

Identical paths merge; each frame is one <rect> as wide as its weight, with
its name as <text> where it fits and a <title> tooltip (the name, its time
and share); the root ("all") at the bottom, callees above their callers,
siblings in name order as flamegraph.pl draws them. Frames narrower than
MIN_WIDTH pixels are left out (flamegraph.pl's --minwidth), and so are their
callees. No JavaScript, no dependency: it reads in a browser and inline in
the report's page.
"""
from __future__ import annotations

import hashlib
from html import escape

WIDTH = 1200         # px
FRAME_H = 16         # px per stack level
PAD = 10             # px left and right
TOP = 28             # px above the highest frame: the title
BOTTOM = 6
FONT = 11            # px
CHAR_W = 6.2         # px, a FONT-size character's width, about
MIN_WIDTH = 0.1      # px


class _Node:
    __slots__ = ("name", "value", "children")

    def __init__(self, name: str):
        self.name, self.value, self.children = name, 0, {}


def parse(lines) -> _Node:
    """The call tree of folded lines; a line without a weight is a
    ValueError naming it."""
    root = _Node("all")
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        path, _, weight = line.rpartition(" ")
        try:
            w = int(float(weight))
        except ValueError:
            raise ValueError(f"folded line {n}: expected 'frame;frame;... weight', got {line!r}") from None
        if not path or w < 0:
            raise ValueError(f"folded line {n}: expected 'frame;frame;... weight', got {line!r}")
        root.value += w
        node = root
        for frame in path.split(";"):
            node = node.children.setdefault(frame, _Node(frame))
            node.value += w
    return root


def _depth(node: _Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0)


def _color(name: str) -> str:
    """flamegraph.pl's 'hot' palette, fixed per name (a hash, not random)."""
    h = hashlib.sha1(name.encode()).digest()
    return f"rgb({205 + h[0] % 50},{h[1] % 230},{h[2] % 55})"


def _time(ps: int, unit: str) -> str:
    if unit == "ps":
        return f"{ps / 1e9:,.3f} ms"
    return f"{ps:,} {unit}"


def flamegraph_svg(folded_lines, title: str = "Flame graph", unit: str = "ps", width: int = WIDTH) -> str:
    """The SVG text (no XML declaration, so it can be inlined in HTML) of
    folded_lines; unit names the weights ("ps": shown as ms)."""
    root = parse(folded_lines)
    depth = _depth(root)
    height = TOP + depth * FRAME_H + BOTTOM
    span = width - 2 * PAD
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Verdana, sans-serif" font-size="{FONT}" '
           f'class="flamegraph">',
           f'<text x="{width / 2:.1f}" y="{TOP - 10}" text-anchor="middle" font-size="{FONT + 3}">{escape(title)}'
           '</text>']
    if not root.value:
        out.append(f'<text x="{width / 2:.1f}" y="{TOP + FRAME_H}" text-anchor="middle">no samples</text>')
        out.append("</svg>")
        return "\n".join(out)
    scale = span / root.value

    def draw(node: _Node, x: float, level: int) -> None:
        w = node.value * scale
        if w < MIN_WIDTH:
            return
        y = height - BOTTOM - (level + 1) * FRAME_H
        share = 100.0 * node.value / root.value
        tip = f"{node.name} ({_time(node.value, unit)}, {share:.2f} %)"
        fits = int((w - 4) / CHAR_W)
        label = node.name if len(node.name) <= fits else (node.name[:fits - 2] + ".." if fits >= 3 else "")
        out.append(f'<g class="frame"><title>{escape(tip)}</title>'
                   f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{FRAME_H - 1}" rx="2" '
                   f'fill="{_color(node.name)}"/>'
                   + (f'<text x="{x + 3:.2f}" y="{y + FRAME_H - 4}">{escape(label)}</text>' if label else "")
                   + "</g>")
        for name in sorted(node.children):
            child = node.children[name]
            draw(child, x, level + 1)
            x += child.value * scale

    draw(root, PAD, 0)
    out.append("</svg>")
    return "\n".join(out)
