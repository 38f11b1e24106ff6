"""The improve report's lineage chart: every edge is drawn from the ledger's parent, no edge
runs through another node, and nothing is cut off at the bottom (issue 30)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from types import SimpleNamespace

from metaeval.protocols.improve.bundle import lineage
from metaeval.protocols.improve.charts import DX, LABEL_CHARS, lineage_svg

SVG = "{http://www.w3.org/2000/svg}"


def _entry(trial: int, parent: str, decision: str, score: float | None) -> dict:
    return {
        "trial": trial,
        "candidate_id": f"trial-{trial:03d}",
        "parent_id": parent,
        "candidate_commit": None,
        "decision": decision,
        "failure_class": "meta_agent_failure" if decision == "invalid" else None,
        "optimize_score": score,
        "held_out_score": None,
    }


# baseline -> 001 (rejected), 002 (promoted); 002 -> 003 (invalid), 004 (rejected),
# 005 (promoted); 005 -> 006 (rejected). Trial 003's parent is trial-002, trial 004's too,
# trial 006's is trial-005: the chart used to draw children by position, not by parent.
LEDGER = [
    _entry(1, "baseline", "rejected", 0.1),
    _entry(2, "baseline", "promoted", 0.3),
    _entry(3, "trial-002", "invalid", None),
    _entry(4, "trial-002", "rejected", 0.2),
    _entry(5, "trial-002", "promoted", 0.4),
    _entry(6, "trial-005", "rejected", 0.4),
]


def _svg(ledger: list[dict]) -> ET.Element:
    plan = SimpleNamespace(baseline_id="baseline", baseline_commit="0" * 40)
    baseline = SimpleNamespace(optimize_score=0.2, held_out_score=None)
    nodes = lineage(plan, baseline, ledger)  # type: ignore[arg-type]
    text = lineage_svg(nodes).replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    return ET.fromstring(text)


def _circles(svg: ET.Element) -> dict[str, tuple[float, float, float]]:
    return {
        c.get("data-node", ""): (float(c.get("cx", 0)), float(c.get("cy", 0)), float(c.get("r", 0)))
        for c in svg.iter(f"{SVG}circle")
    }


def _points(d: str) -> list[tuple[float, float]]:
    """The corners of an M/H/V path."""
    tokens = re.findall(r"([MHV])([-\d.]+)(?:,([-\d.]+))?", d)
    points: list[tuple[float, float]] = []
    for op, a, b in tokens:
        if op == "M":
            points.append((float(a), float(b)))
        elif op == "H":
            points.append((float(a), points[-1][1]))
        else:
            points.append((points[-1][0], float(a)))
    return points


def _hits(
    p: tuple[float, float], q: tuple[float, float], circle: tuple[float, float, float]
) -> bool:
    """Does the axis-aligned segment p-q pass through the circle?"""
    cx, cy, r = circle
    if p[1] == q[1]:
        lo, hi = sorted((p[0], q[0]))
        return abs(cy - p[1]) < r and lo - r < cx < hi + r
    lo, hi = sorted((p[1], q[1]))
    return abs(cx - p[0]) < r and lo - r < cy < hi + r


def test_every_edge_joins_a_node_to_its_ledger_parent_and_crosses_no_other_node() -> None:
    svg = _svg(LEDGER)
    circles = _circles(svg)
    edges = [e for e in svg.iter(f"{SVG}path") if e.get("class") == "edge"]
    pairs = {(e.get("data-parent"), e.get("data-child")) for e in edges}
    assert pairs == {(e["parent_id"], e["candidate_id"]) for e in LEDGER}
    for edge in edges:
        parent, child = edge.get("data-parent", ""), edge.get("data-child", "")
        points = _points(edge.get("d", ""))
        px, py, pr = circles[parent]
        cx, cy, cr = circles[child]
        assert points[0] == (px + pr, py), edge.attrib  # leaves the parent's circle
        assert points[-1] == (cx - cr, cy), edge.attrib  # ends at the child's circle
        assert edge.get("marker-end") == "url(#lineage-arrow)"  # pointing at the child
        for name, circle in circles.items():
            if name in (parent, child):
                continue
            for p, q in zip(points, points[1:], strict=False):
                assert not _hits(p, q, circle), f"{parent}->{child} runs through {name}"


def test_the_promoted_chain_is_the_top_lane_and_siblings_get_lanes_of_their_own() -> None:
    circles = _circles(_svg(LEDGER))
    top = {name for name, (_x, y, _r) in circles.items() if y == circles["baseline"][1]}
    assert top == {"baseline", "trial-002", "trial-005"}
    # trial-003 and trial-004 are both children of trial-002: their edges overlap, two lanes
    assert circles["trial-003"][1] != circles["trial-004"][1]


def test_no_label_is_cut_off_at_the_bottom() -> None:
    for ledger in (LEDGER, [_entry(t, "baseline", "rejected", 0.1) for t in range(1, 6)]):
        svg = _svg(ledger)
        height = float(svg.get("height", 0))
        lowest_text = max(float(t.get("y", 0)) for t in svg.iter(f"{SVG}text"))
        assert lowest_text + 5 <= height  # a 13 px label's descenders stay inside
        assert all(cy + r <= height for _x, cy, r in _circles(svg).values())


def test_a_merge_has_a_dashed_edge_from_its_second_parent() -> None:
    ledger = [
        *LEDGER[:2],
        {**_entry(3, "trial-002", "promoted", 0.9), "second_parent_id": "trial-001"},
    ]
    svg = _svg(ledger)
    merges = [e for e in svg.iter(f"{SVG}path") if e.get("class") == "edge merge"]
    assert [(e.get("data-parent"), e.get("data-child")) for e in merges] == [
        ("trial-001", "trial-003")
    ]
    assert merges[0].get("stroke-dasharray")
    plain = [e for e in svg.iter(f"{SVG}path") if e.get("class") == "edge"]
    assert ("trial-002", "trial-003") in {
        (e.get("data-parent"), e.get("data-child")) for e in plain
    }


def test_nodes_show_held_out_scores_link_where_asked_and_clip_long_ids() -> None:
    long_id = "trial-with-a-name-far-longer-than-a-column-007"
    ledger = [{**_entry(1, "baseline", "promoted", 0.5), "held_out_score": 0.25}]
    ledger.append({**_entry(2, "trial-001", "rejected", 0.4), "candidate_id": long_id})
    plan = SimpleNamespace(baseline_id="baseline", baseline_commit="0" * 40)
    nodes = lineage(plan, SimpleNamespace(optimize_score=0.2, held_out_score=0.1), ledger)  # type: ignore[arg-type]
    text = lineage_svg(nodes, lambda n: None if n["id"] == "baseline" else f"/t/{n['id']}")
    svg = ET.fromstring(text.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))
    links = {
        a.get("href"): a.find(f"{SVG}circle").get("data-node")  # type: ignore[union-attr]
        for a in svg.iter(f"{SVG}a")
    }
    assert links == {"/t/trial-001": "trial-001", f"/t/{long_id}": long_id}
    labels = [t.text or "" for t in svg.iter(f"{SVG}text")]
    assert "held-out 0.250" in labels and "held-out 0.100" in labels and "held-out n/a" in labels
    clipped = [t for t in labels if t.startswith("trial-with")]
    assert clipped == [long_id[: LABEL_CHARS - 1] + "\u2026"]
    titles = [t.text or "" for t in svg.iter(f"{SVG}title")]
    assert any(t.startswith(f"{long_id}: rejected") for t in titles)  # whole in the tooltip
    # columns are DX apart: a clipped id at 15 px (about 9 px a character) stays in its own
    assert LABEL_CHARS * 9 <= DX


def test_bundle_text_is_escaped_in_the_chart() -> None:
    ledger = [{**_entry(1, "baseline", "rejected", 0.1), "candidate_id": "<b>&x"}]
    plan = SimpleNamespace(baseline_id="baseline", baseline_commit="0" * 40)
    nodes = lineage(plan, SimpleNamespace(optimize_score=0.2, held_out_score=None), ledger)  # type: ignore[arg-type]
    text = lineage_svg(nodes, lambda n: f"/t/{n['id']}?a=1&b=2")
    assert "<b>" not in text and "&lt;b&gt;&amp;x" in text and "?a=1&amp;b=2" in text
    ET.fromstring(text)  # well-formed
