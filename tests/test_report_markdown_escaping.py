"""Every report.md carries no raw HTML and no control character from task, model or agent text.

The meta-agent's summary, a trial's reason and evidence and a changed file's name reach
improve's report.md; a build-and-find warning reaches its report.md; each carries HTML, an OSC
52 clipboard write, a CSI sequence and a C1 control. The report is rendered by a real Markdown
renderer with HTML on: only the tags the renderer makes itself come out.
"""

from __future__ import annotations

import pytest

from metaeval.protocols.buildfind.report.pages import render_markdown as buildfind_markdown
from metaeval.protocols.improve.report import render_markdown as improve_markdown
from metaeval.protocols.improve.summary_records import RunSummary
from metaeval.report.markdown import md_document, md_fence
from test_untrusted_text import HTML, OSC52, RENDERER_TAGS, rendered_tags

CSI = "\x1b[2J\x1b[31m"
C1 = "\x9b6n"
HOSTILE = f"{HTML} {OSC52} {CSI} {C1} <a href=javascript:alert(3)>x</a>"


def assert_clean(markdown: str) -> None:
    controls = [c for c in markdown if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    assert not controls, controls
    assert rendered_tags(markdown) <= RENDERER_TAGS


def improve_inputs(text: str) -> tuple[RunSummary, list[dict], list[dict]]:
    summary = {
        "baseline": {"id": "baseline", "optimize_score": 0.5, "held_out_score": 0.5},
        "final": {"id": "baseline", "optimize_score": 0.5, "held_out_score": 0.5},
        "trials_consumed": 1,
        "trial_budget": 1,
        "promotions": 0,
        "valid_candidates": 1,
        "invalid_or_broken_trials": 0,
    }
    node = {
        "id": f"trial-001{text}",
        "parent": "baseline",
        "decision": "rejected",
        "failure_class": None,
        "optimize_score": 0.25,
        "held_out_score": None,
    }
    trial = {
        "trial": 1,
        "id": node["id"],
        "parent": "baseline",
        "summary": f"I changed the prompt.\n{text}\n```\n<script>alert(4)</script>",
        "reason": f"worse than its parent {text}",
        "failure_class": None,
        "failure_meaning": "",
        "suites": [],
        "evidence": [f"task t1 failed: {text}"],
        "files": [f"target_agent/a`b{text}.py"],
    }
    return RunSummary.model_validate(summary), [node], [trial]


def test_improve_report_md_shows_meta_agent_text_as_text() -> None:
    markdown = improve_markdown("run-1", *improve_inputs(HOSTILE))
    assert_clean(markdown)
    assert "\\x1b]52;c;" in markdown and "&lt;script&gt;alert(2)" in markdown
    assert "> I changed the prompt." in markdown  # the summary is quoted, not raw


def test_buildfind_report_md_shows_warnings_as_text() -> None:
    markdown = buildfind_markdown({}, {"warnings": [HOSTILE]})
    assert_clean(markdown)
    assert "\\x1b]52;c;" in markdown


@pytest.mark.parametrize(
    "text",
    [
        HOSTILE,
        f"```\n{HOSTILE}\n```\n{HOSTILE}",  # a fence the text opens and closes itself
        f"```x`y\n{HOSTILE}",  # not a fence: a backtick in its info string
        f"````\n```\n{HOSTILE}\n````\n{HOSTILE}",  # a shorter fence does not close
        f"`{HOSTILE}` {HOSTILE} ``{HOSTILE}",  # code spans, closed and not
    ],
)
def test_md_document_leaves_no_html_or_control_character_whatever_the_writer_forgot(
    text: str,
) -> None:
    document = md_document(f"# Report\n\n{text}\n\n{md_fence(HOSTILE)}\n")
    assert_clean(document)
    # what is already escaped (or in code) is not touched again
    assert md_document(document) == document
