"""A flame graph SVG from a speedscope file: every thread of every process merged under one
root, a process/thread row first, so one picture shows where the whole job spends its time.

Pure. py-spy writes one format per recording; rendering the SVG from its speedscope output keeps
both views on the same samples (two recordings would double the cost and disagree)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

WIDTH = 1200
ROW = 16
MIN_WIDTH_PX = 0.3
"""Frames narrower than this are left out (they would be invisible and bloat the file)."""


@dataclass
class Node:
    """A frame of the merged tree; ``weight`` is the samples at or under it, and so its width."""

    name: str
    weight: float = 0.0
    children: dict[str, Node] = field(default_factory=dict)

    def child(self, name: str) -> Node:
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = Node(name)
        return node


def _frame_label(frame: Any) -> str:
    if not isinstance(frame, Mapping):
        return "?"
    name = str(frame.get("name", "?"))
    file = str(frame.get("file") or "")
    line = frame.get("line")
    short = file.rsplit("/", 1)[-1]
    return f"{name} ({short}:{line})" if short and isinstance(line, int) else name


def merge(doc: Mapping[str, Any]) -> Node:
    """Every sampled profile of a speedscope document as one tree of weights; malformed parts
    are skipped (the file came from another program)."""
    frames = doc.get("shared", {}).get("frames", []) if isinstance(doc, Mapping) else []
    labels = [_frame_label(f) for f in frames] if isinstance(frames, list) else []
    root = Node("all")
    for profile in doc.get("profiles", []) if isinstance(doc, Mapping) else []:
        if not isinstance(profile, Mapping) or profile.get("type") != "sampled":
            continue
        samples = profile.get("samples", [])
        weights = profile.get("weights", [])
        if not isinstance(samples, list) or not isinstance(weights, list):
            continue
        thread = root.child(str(profile.get("name", "thread")))
        for stack, w in zip(samples, weights, strict=False):
            if not isinstance(stack, list) or not isinstance(w, int | float) or w <= 0:
                continue
            root.weight += w
            thread.weight += w
            node = thread
            for i in stack:  # outermost first
                if isinstance(i, int) and 0 <= i < len(labels):
                    node = node.child(labels[i])
                    node.weight += w
    return root


def _colour(name: str) -> str:
    h = sum(name.encode()) % 60
    return f"rgb({205 + h // 2},{80 + h * 2},{40 + h // 3})"


def render(root: Node, title: str = "gputop flame graph") -> str:
    """The tree as an SVG, root at the bottom; each frame's width is its share of samples."""
    rects: list[str] = []
    depth_max = 0
    scale = WIDTH / root.weight if root.weight else 0.0

    def walk(node: Node, x: float, depth: int, path: Sequence[str]) -> None:
        nonlocal depth_max
        w = node.weight * scale
        if w < MIN_WIDTH_PX:
            return
        depth_max = max(depth_max, depth)
        share = node.weight / root.weight * 100
        label = escape(node.name)
        text = escape(node.name[: int(w / 7)]) if w > 21 else ""
        rects.append(
            f'<g><title>{label} ({share:.1f}%)</title><rect x="{x:.1f}" y="{{y{depth}}}" '
            f'width="{w:.1f}" height="{ROW - 1}" fill="{_colour(node.name)}"/>'
            f'<text x="{x + 3:.1f}" y="{{t{depth}}}">{text}</text></g>'
        )
        cx = x
        for child in sorted(node.children.values(), key=lambda n: n.name):
            walk(child, cx, depth + 1, (*path, child.name))
            cx += child.weight * scale

    if root.weight:
        walk(root, 0.0, 0, ())
    height = (depth_max + 1) * ROW + 40
    body = "\n".join(rects)
    for d in range(depth_max + 1):  # root at the bottom
        y = height - 10 - (d + 1) * ROW
        body = body.replace(f"{{y{d}}}", str(y)).replace(f"{{t{d}}}", str(y + ROW - 4))
    empty = "" if root.weight else '<text x="10" y="40">no samples</text>'
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="monospace" font-size="11">\n'
        f'<text x="10" y="16" font-size="14">{escape(title)}</text>{empty}\n{body}\n</svg>\n'
    )
