"""A build-and-find run of 10,000 question rows stays responsive in `metaeval view`: the grid
is computed on the server and the rows page sends one page of 200 rows, whatever the filter."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import polars as pl

from metaeval.protocols.buildfind.rows.table import SCHEMA
from metaeval.protocols.buildfind.tables.files import write_parquet
from metaeval.records import RunDir
from test_view import start_viewer, stop

TASKS, BUILDERS, FINDERS, TRIALS, QUESTIONS = 5, 4, 2, 5, 50  # 5*4*2*5*50 = 10,000 rows


def make_run(path: Path) -> None:
    config = {
        "builders": [{"name": f"b{i}", "agent": "scripted"} for i in range(BUILDERS)],
        "finders": [{"name": f"f{i}", "agent": "scripted"} for i in range(FINDERS)],
        "base_finders": [],
    }
    RunDir.open(path, protocol="buildfind", config=config, hashes={"p": "x"}, seeds={}).close()
    rows = []
    for t in range(TASKS):
        for b in range(BUILDERS):
            for f in range(FINDERS):
                for trial in range(TRIALS):
                    for q in range(QUESTIONS):
                        # finder f1 answers question q correctly when q % 5 < b + 1 (b0: 1 in 5)
                        correct = q % 5 < b + 1 if f == 1 else q % 2 == 0
                        rows.append({
                            "slice": "formal", "task": f"t{t}", "builder": f"b{b}",
                            "builder_family": "local", "finder": f"f{f}", "finder_family": "local",
                            "effort_panel": "default", "build_trial": 0, "find_trial": trial,
                            "question_id": f"q{q:02d}", "gold": "A",
                            "answer": "A" if correct else "B", "correct": correct,
                            "compile_pass": True, "label": "implemented_gold",
                            "label_source": "consensus_prelabel",
                            "novel_retrieval_bytes": 1000 + q, "novel_tool_call_bytes": 10,
                            "input_tokens": 5, "output_tokens": 1,
                        })  # fmt: skip
    frame = pl.DataFrame(rows, schema={k: v for k, v in SCHEMA.items() if k in rows[0]})
    write_parquet(frame, path / "question_rows.parquet", path)


def timed(viewer, path: str) -> tuple[float, str]:
    started = time.perf_counter()
    body = viewer.page(path)
    return time.perf_counter() - started, body


def test_ten_thousand_question_rows_page_on_the_server(tmp_path: Path) -> None:
    make_run(tmp_path / "runs" / "big")
    viewer = start_viewer(str(tmp_path / "runs"))
    try:
        rid = viewer.run_id("big")
        seconds, html = timed(viewer, f"/run/{rid}")
        # recovery of builder b2 x finder f1: questions with q % 5 < 3 are right: 3/5
        cell = re.search(
            r'cell\?builder=b2&amp;finder=f1"><span class="big">([0-9.]+)</span>', html
        )
        assert cell and cell.group(1) == "0.600"
        assert seconds < 3.0, seconds
        seconds, page = timed(viewer, f"/run/{rid}/questions")
        assert "10000 rows match" in page and "page 1 of 50 (10000 rows)" in page
        body = re.search(r'id="question-rows">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
        assert body.count("<tr>") == 200
        assert len(page) < 250_000 and seconds < 3.0, (len(page), seconds)
        _, last = timed(viewer, f"/run/{rid}/questions?page=999")
        assert "page 50 of 50" in last
        seconds, narrow = timed(viewer, f"/run/{rid}/questions?finder=f1&task=t3&correct=true")
        # t3, f1, correct: per builder b 5 trials x 10*(b+1) questions -> 50*(1+2+3+4) = 500
        assert "500 rows match" in narrow and "page 1 of 3" in narrow
        status, _, text = viewer.get(f"/api/run/{rid}/rows?page=3&builder=b0")
        data = json.loads(text)
        assert status == 200 and (data["total"], data["page"], len(data["items"])) == (2500, 3, 200)
        assert data["items"][0]["builder"] == "b0" and "find" in data["items"][0]
    finally:
        stop(viewer)
