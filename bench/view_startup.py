"""Start-up of `metaeval view` on a large audit run: process start to the first page served.

Writes a synthetic audit run of N cells (default 1,000: N/2 tasks x the static source and one
model) through the project's own writer (`RunDir`), records in the shape a real run writes
(cell records with their execution results and blobs, findings with evidence), then starts
`metaeval view RUN --port P` as a process and times, from the moment it is spawned:

- the first answer of ``GET /`` (the runs list: discovery, status and headline of the run);
- then ``GET /run/ID`` (headline, charts and the first page of the findings table), and a
  finding's page.

Usage: python bench/view_startup.py [--cells 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from metaeval.records import RunDir

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
MODEL = "scripted/bench"
SEVERITIES = ("Critical", "High", "Medium", "Low")


def finding(task: str, source: str, attempt: str, i: int) -> dict:
    return {
        "task_id": task,
        "attempt": attempt,
        "category": "ENV",
        "subcategory": "ENV-PATH",
        "severity": SEVERITIES[i % 4],
        "finding_type": "Bug",
        "title": f"Hard-coded path /home/user{i}/input.csv is not provided by the environment",
        "description": "solution/solve.sh reads a path the task never creates. " * 4,
        "evidence": [
            {"file": "solution/solve.sh", "line_start": 6, "line_end": 6, "snippet": "open("}
        ],
        "recommendation": "Use a path under /app.",
        "confidence": 0.5 + (i % 5) / 10,
        "source": source,
        "sources": [source],
        "protocol": "static" if source == "static" else "definition",
        "evidence_verified": True,
        "evidence_problems": [],
    }


def make_run(path: Path, cells: int) -> None:
    tasks = [f"task-{n:05d}" for n in range(cells // 2)]
    config = {
        "benchmark": str(BENCH),
        "models": [MODEL],
        "static_only": False,
        "tier": "definition",
        "tasks": tasks,
        "execution_checks": True,
    }
    run = RunDir.open(path, protocol="audit", config=config, hashes={"benchmark": "x"}, seeds={})
    try:
        log = run.blobs.put("$ bash /solution/solve.sh   [exit 1, 0.13 s]\n" * 20)
        calls = run.blobs.put(json.dumps({"model": MODEL, "text": "[]", "raw_request": {}}))
        phase = {"ran": True, "passed": False, "reward": 0.0, "log_blob": log, "note": ""}
        i = 0
        for task in tasks:
            for source in ("static", MODEL):
                attempt = f"{i:012x}"
                cell = {
                    "task_id": task,
                    "source": source,
                    "attempt": attempt,
                    "status": "ok",
                    "infra_error": False,
                    "n_files": 6,
                    "n_findings": 1,
                    "cuts": [],
                }
                if source == "static":
                    cell["execution"] = {
                        "backend": "bubblewrap",
                        "oracle": phase,
                        "null_agent": phase,
                    }
                else:
                    usage = {"input_tokens": 2000, "output_tokens": 300}
                    cell.update(
                        usage=usage, cost_usd=0.0, model_calls_blob=calls, audit_failure=False
                    )
                run.submit([("findings", finding(task, source, attempt, i))], [("audits", cell)])
                i += 1
        run.flush()
    finally:
        run.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def once(run: Path) -> tuple[float, float, float]:
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaeval.cli", "view", str(run), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                status, body = get(port, "/")
                break
            except OSError:
                if proc.poll() is not None:
                    raise SystemExit("the viewer exited") from None
                time.sleep(0.005)
        first = time.perf_counter() - started
        assert status == 200, status
        run_id = re.search(r'href="/run/([^"]+)"', body).group(1)  # type: ignore[union-attr]
        t0 = time.perf_counter()
        status, page = get(port, f"/run/{run_id}")
        run_page = time.perf_counter() - t0
        assert status == 200 and "page 1 of" in page, status
        t0 = time.perf_counter()
        status, _ = get(port, f"/run/{run_id}/finding/7")
        finding_page = time.perf_counter() - t0
        assert status == 200, status
        return first, run_page, finding_page
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "audit-large"
        t0 = time.perf_counter()
        make_run(run, args.cells)
        size = sum(p.stat().st_size for p in run.rglob("*.jsonl"))
        print(f"synthetic audit run: {args.cells} cells, {args.cells} findings, "
              f"{size / 1e6:.1f} MB of records, written in {time.perf_counter() - t0:.1f} s")  # fmt: skip
        results = [once(run) for _ in range(args.repeat)]
    for name, values in zip(("process start -> first page (runs list)", "run page (findings table)", "a finding's page"), zip(*results, strict=True), strict=True):  # fmt: skip
        print(f"{name}: median {statistics.median(values):.3f} s (runs: "
              + ", ".join(f"{v:.3f}" for v in values) + ")")  # fmt: skip


if __name__ == "__main__":
    main()
