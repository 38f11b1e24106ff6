"""Improve's charts, as inline SVG: the lineage of candidates and the scores. The static
report (`report.html`) and the viewer (`metaeval view`) draw the same lineage chart.

Lineage: x is the order of the nodes (baseline, then trial by trial); the promoted chain
runs along the top lane, every other candidate on a lane below. Each edge is drawn from the
ledger's parent of the node: it leaves its parent to the right, runs down a trunk beside the
parent's column and across to the child, so a child is never drawn as another node's. A
merge (population search) has a second, dashed edge from its other parent. Lanes are reused
when edges do not overlap; the picture is tall enough for the lowest node's labels. Each
node shows its optimize score, its id (cut to fit its column; the tooltip has it whole), its
held-out score and its decision, and links to its trial when the caller gives links.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

COLOURS = {
    "baseline": "#4c78a8",
    "promoted": "#54a24b",
    "rejected": "#9d9d9d",
    "invalid": "#e45756",
}


def score_text(value: object) -> str:
    """A score to 3 places, 'n/a' when missing."""
    return "n/a" if value is None else f"{value:.3f}"


X0, DX = 70, 150  # the first column and the distance between columns
Y0, DY = 70, 130  # the top lane and the distance between lanes
RADIUS = 26
TRUNK = 40  # how far right of its parent's centre an edge turns down
LABEL_CHARS = 16  # what of a node's id fits in its column at the label's font size
LABELS_BELOW = 84  # from a node's centre to the baseline of its last label line

Link = Callable[[dict[str, Any]], str | None]
"""A node -> the address its circle links to (None: no link)."""


def _layout(nodes: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Node id -> (x, y): x by order; the baseline and promoted candidates on lane 0, every
    other node on the first lane below whose edges so far end left of this edge's start."""
    positions: dict[str, tuple[int, int]] = {}
    lane_end: list[int] = []  # per lane below the top: the x where its last edge ends
    for index, node in enumerate(nodes):
        x = X0 + index * DX
        parent = positions.get(node.get("parent") or "")
        if node.get("decision") in ("baseline", "promoted") or parent is None:
            positions[node["id"]] = (x, Y0)
            continue
        start = parent[0] + TRUNK
        lane = next((i for i, end in enumerate(lane_end) if end < start), len(lane_end))
        if lane == len(lane_end):
            lane_end.append(x)
        lane_end[lane] = x
        positions[node["id"]] = (x, Y0 + DY * (lane + 1))
    return positions


def _edge(parent: tuple[int, int], child: tuple[int, int]) -> str:
    """The path from a parent's circle to its child's: right, down the trunk, across."""
    (x1, y1), (x2, y2) = parent, child
    if y1 == y2:
        return f"M{x1 + RADIUS},{y1} H{x2 - RADIUS}"
    return f"M{x1 + RADIUS},{y1} H{x1 + TRUNK} V{y2} H{x2 - RADIUS}"


def clip(text: str, chars: int = LABEL_CHARS) -> str:
    """`text` escaped and cut to `chars` characters (an ellipsis marks the cut)."""
    return html.escape(text if len(text) <= chars else text[: chars - 1] + "\u2026")


def lineage_svg(nodes: list[dict[str, Any]], link: Link | None = None) -> str:
    """Every node as a large labelled circle, an edge from each node's ledger parent to it
    (`class="edge"`, with `data-parent` and `data-child`, an arrowhead at the child) and a
    dashed one from a merge's second parent (`class="edge merge"`); a node is wrapped in a
    link where `link` gives one. All text from the bundle is escaped."""
    positions = _layout(nodes)
    width = 140 + DX * max(len(nodes) - 1, 0)
    lowest = max((y for _x, y in positions.values()), default=Y0)
    height = lowest + LABELS_BELOW + 12  # the label lines under the lowest node
    parts = [
        f'<svg class="lineage" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="lineage of candidates" '
        'font-family="system-ui, sans-serif">',
        '<defs><marker id="lineage-arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#777"/></marker></defs>',
    ]
    for node in nodes:
        for parent, kind, dash in (
            (node.get("parent"), "edge", ""),
            (node.get("second_parent"), "edge merge", ' stroke-dasharray="6 4"'),
        ):
            if parent not in positions:
                continue
            parts.append(
                f'<path class="{kind}" data-parent="{html.escape(parent)}" '
                f'data-child="{html.escape(node["id"])}" '
                f'd="{_edge(positions[parent], positions[node["id"]])}" fill="none" '
                f'stroke="#777" stroke-width="2.5"{dash} marker-end="url(#lineage-arrow)"/>'
            )
    for node in nodes:
        shape = _node(node, positions[node["id"]])
        href = link(node) if link else None
        parts.append(f'<a href="{html.escape(href)}">{shape}</a>' if href else shape)
    parts.append("</svg>")
    return "".join(parts)


def _node(node: dict[str, Any], at: tuple[int, int]) -> str:
    """One node: its circle with the optimize score inside, then id, held-out and decision."""
    x, y = at
    decision = node.get("decision") or "n/a"
    fill = COLOURS.get(decision, "#9d9d9d")
    held = f"held-out {score_text(node.get('held_out_score'))}"
    title = f"{node['id']}: {decision}"
    if node.get("failure_class"):
        title += f" ({node['failure_class']})"
    title += f"; optimize {score_text(node.get('optimize_score'))}, {held}"
    return (
        f'<circle cx="{x}" cy="{y}" r="{RADIUS}" fill="{fill}" stroke="#333" '
        f'stroke-width="1" data-node="{html.escape(node["id"])}">'
        f"<title>{html.escape(title)}</title></circle>"
        f'<text x="{x}" y="{y + 6}" font-size="15" font-weight="600" text-anchor="middle" '
        f'fill="#fff">{score_text(node.get("optimize_score"))}</text>'
        f'<text x="{x}" y="{y + 48}" font-size="15" text-anchor="middle">{clip(node["id"])}</text>'
        f'<text x="{x}" y="{y + 66}" font-size="13" text-anchor="middle" fill="#555">{held}</text>'
        f'<text x="{x}" y="{y + LABELS_BELOW}" font-size="13" text-anchor="middle" '
        f'fill="{COLOURS.get(decision, "#555")}">{clip(decision)}</text>'
    )


@dataclass(frozen=True)
class _ScoreFrame:
    """The score chart's geometry: margins, one column per node, a 0..1 vertical axis."""

    nodes: int
    left: int = 70
    right: int = 30
    top: int = 40
    bottom: int = 70
    step: int = 120
    plot_h: int = 300

    @property
    def width(self) -> int:
        return self.left + self.right + self.step * max(self.nodes - 1, 1)

    @property
    def height(self) -> int:
        return self.top + self.plot_h + self.bottom

    def x_of(self, index: int) -> int:
        return self.left + index * self.step

    def y_of(self, value: float) -> float:
        return self.top + self.plot_h * (1 - value)


def scores_svg(nodes: list[dict]) -> str:
    """Optimize (solid) and held-out (dashed) score per node on a 0..1 axis with gridlines;
    the baseline's optimize score as a dotted reference line."""
    frame = _ScoreFrame(len(nodes))
    parts = [
        f'<svg viewBox="0 0 {frame.width} {frame.height}" width="{frame.width}" '
        f'height="{frame.height}" role="img" '
        'aria-label="scores per trial" font-family="system-ui, sans-serif">'
    ]
    parts += _score_axis(frame)
    base = nodes[0].get("optimize_score") if nodes else None
    if base is not None:
        y = frame.y_of(base)
        parts.append(
            f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.width - frame.right}" y2="{y:.1f}" '
            'stroke="#4c78a8" stroke-width="1.5" stroke-dasharray="2 4"/>'
        )
    parts += _score_lines(frame, nodes)
    parts += _node_labels(frame, nodes)
    left = frame.left
    parts.append(
        f'<text x="{left}" y="22" font-size="14" fill="#4c78a8">&#9473; optimize</text>'
        f'<text x="{left + 120}" y="22" font-size="14" fill="#f58518">&#9476; held-out</text>'
        f'<text x="{left + 240}" y="22" font-size="14" fill="#4c78a8">&#8943; baseline optimize</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _score_axis(frame: _ScoreFrame) -> list[str]:
    """Gridlines and tick labels at 0, 0.25, ..., 1, and the axis title."""
    parts = []
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        y = frame.y_of(tick)
        parts.append(
            f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.width - frame.right}" '
            f'y2="{y:.1f}" stroke="#e3e3e3"/>'
        )
        parts.append(
            f'<text x="{frame.left - 10}" y="{y + 5:.1f}" font-size="14" text-anchor="end">'
            f"{tick:.2f}</text>"
        )
    middle = frame.top + frame.plot_h / 2
    parts.append(
        f'<text x="18" y="{middle:.0f}" font-size="14" text-anchor="middle" '
        f'transform="rotate(-90 18 {middle:.0f})">score</text>'
    )
    return parts


def _score_lines(frame: _ScoreFrame, nodes: list[dict]) -> list[str]:
    """The optimize (solid) and held-out (dashed) series: a polyline and a dot per score."""
    parts = []
    for key, colour, dash in (
        ("optimize_score", "#4c78a8", ""),
        ("held_out_score", "#f58518", ' stroke-dasharray="8 5"'),
    ):
        points = [
            (frame.x_of(i), frame.y_of(n[key]))
            for i, n in enumerate(nodes)
            if n.get(key) is not None
        ]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="3"{dash}/>'
            )
        for x, y in points:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colour}"/>')
    return parts


def _node_labels(frame: _ScoreFrame, nodes: list[dict]) -> list[str]:
    """Each node's id under its column, and its decision coloured below it."""
    parts = []
    below = frame.top + frame.plot_h
    for i, node in enumerate(nodes):
        x = frame.x_of(i)
        parts.append(
            f'<text x="{x}" y="{below + 24}" font-size="14" text-anchor="middle">'
            f"{html.escape(node['id'])}</text>"
        )
        decision = node.get("decision") or ""
        parts.append(
            f'<text x="{x}" y="{below + 44}" font-size="12" text-anchor="middle" '
            f'fill="{COLOURS.get(decision, "#555")}">{html.escape(decision)}</text>'
        )
    return parts
