"""Issue 37 item 3: the instruction's own commands write a file the tests do not read, while
the tests demand another that nothing tells the agent to write (instruction-commands check).
Each look-alike differs in the one fact that makes the task consistent. The finding is an
absence claim (the tested file may be in the image): `assumed` until a real bubblewrap run
of the task's tests logs the file as missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from metaeval.protocols.audit.cells.static import static_cell
from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.instruction_commands import instructed_writes
from metaeval.protocols.audit.static_checks import STATIC_CHECKS, run_static_checks
from metaeval.protocols.audit.task_view import load_task
from metaeval.records.blobs import BlobStore
from test_audit_static_checks import make_task
from test_audit_truth import sandboxed, write_task  # noqa: F401 - the fixture is used by name

INSTRUCTION = """\
# Word counts

Count the words of every file in `/app/docs` with the provided script. Run it like this:

```bash
cd /app
python3 count.py docs > counts.csv
```

Each line of the result holds a file name and its word count.
"""
TEST_PY = """\
import csv

def test_counts():
    rows = list(csv.reader(open("/app/word_counts.csv")))
    assert ["a.txt", "3"] in rows
"""
DOCKERFILE = """\
FROM python:3.11-slim
WORKDIR /app
COPY count.py /app/count.py
COPY docs /app/docs
"""
TASK = {
    "instruction.md": INSTRUCTION,
    "tests/test_outputs.py": TEST_PY,
    "environment/Dockerfile": DOCKERFILE,
    "environment/count.py": "import sys\nprint('a.txt,3')\n",
    "environment/docs/a.txt": "one two three\n",
    "solution/solve.sh": "#!/bin/bash\ncd /app && python3 count.py docs > word_counts.csv\n",
}


def findings(tmp_path: Path, changes: dict[str, str | None] | None = None) -> list[Finding]:
    task = make_task(tmp_path, changes, base=TASK)
    [check] = [c for c in STATIC_CHECKS if c.name == "instruction-commands"]
    return run_static_checks(task, [check])


def test_the_instructions_command_writes_another_file_than_the_tests_read(
    tmp_path: Path,
) -> None:
    [finding] = findings(tmp_path)
    assert finding.subcategory == "INST-CONTRADICT" and finding.severity == "High"
    # the tested file may be in the image: an absence claim, kept at Low until a run shows it
    assert finding.claim == "absence" and finding.evidence_tier == "assumed"
    assert finding.tier_reason.startswith("absence claim; not seen: what the task's image holds")
    assert "`/app/counts.csv`" in finding.title and "`/app/word_counts.csv`" in finding.title
    cited = [(e.file, e.line_start, e.snippet) for e in finding.evidence]
    assert ("instruction.md", 7, "python3 count.py docs > counts.csv") in cited
    assert ("tests/test_outputs.py", 4) in [(f, n) for f, n, _ in cited]


def test_the_same_name_in_another_directory_is_the_same_deliverable(tmp_path: Path) -> None:
    moved = TEST_PY.replace("/app/word_counts.csv", "/app/out/counts.csv")
    [finding] = findings(tmp_path, {"tests/test_outputs.py": moved})
    assert "`/app/out/counts.csv`" in finding.title


@pytest.mark.parametrize(
    "why, changes",
    [
        # the tests read what the command writes
        ("tests read it", {"tests/test_outputs.py": TEST_PY.replace("word_counts", "counts")}),
        # the prose asks for the tested file too (a later step renames it)
        (
            "instruction names it",
            {"instruction.md": INSTRUCTION + "\nThen rename it to `word_counts.csv`.\n"},
        ),
        # the image provides it
        (
            "environment ships it",
            {
                "environment/Dockerfile": DOCKERFILE + "COPY word_counts.csv /app/\n",
                "environment/word_counts.csv": "a.txt,3\n",
            },
        ),
        # the tests write it before reading it
        (
            "tests write it",
            {
                "tests/test_outputs.py": "import subprocess\n"
                "subprocess.run('python3 /app/count.py docs > /app/word_counts.csv', "
                "shell=True)\n" + TEST_PY
            },
        ),
        # the tests' directory is named: the agent is told where the file goes
        (
            "directory named",
            {
                "instruction.md": INSTRUCTION + "\nKeep the results under `out/`.\n",
                "tests/test_outputs.py": TEST_PY.replace(
                    "/app/word_counts.csv", "/app/out/counts.csv"
                ),
            },
        ),
        # another kind of file: not the same deliverable
        ("other extension", {"tests/test_outputs.py": TEST_PY.replace(".csv", ".json")}),
        # a Python block is not a command the agent runs in the shell
        ("python block", {"instruction.md": INSTRUCTION.replace("```bash", "```python")}),
    ],
)
def test_look_alikes_without_the_contradiction(
    tmp_path: Path, why: str, changes: dict[str, str | None]
) -> None:
    assert findings(tmp_path, changes) == [], why


def test_instructed_writes_reads_redirects_copies_and_prompts() -> None:
    text = (
        "Steps:\n\n"
        "$ python3 run.py --output report.json\n"
        "```sh\n"
        "cd /srv\n"
        "cp data/raw.txt /srv/clean/raw.txt\n"
        "make 2>&1 | tee build.log\n"
        "echo $HOME > $OUT\n"
        "```\n"
        "```\n"
        "ls /etc > /tmp/list.txt\n"
        "```\n"
        "Then run `jq -c . in.json > /app/out.json`; the `a > b` rule holds.\n"
    )
    writes = instructed_writes(text, "/app")
    assert [(w.path, w.line) for w in writes] == [
        ("/app/report.json", 3),
        ("/srv/clean/raw.txt", 6),
        ("/srv/build.log", 7),
        ("/app/out.json", 13),
    ]


# ------------------------------------------------------------------ shown by a run (bwrap)

CHECK_PY = """\
import csv

rows = list(csv.reader(open("/app/word_counts.csv")))
assert ["a.txt", "3"] in rows
"""
RUN_TASK = {
    "instruction.md": INSTRUCTION,
    "environment/count.py": "import sys\nprint('a.txt,3')\n",
    "environment/docs/a.txt": "one two three\n",
    "tests/check.py": CHECK_PY,
    "solution/solve.sh": "#!/bin/bash\ncd /app && python3 count.py docs > word_counts.csv\n",
}
# the tests make the file themselves through a variable the static check cannot follow
MAKES_IT = """#!/bin/bash
mkdir -p /logs/verifier
OUT=/app/word_$(echo counts).csv
python3 /app/count.py docs > "$OUT"
if python3 /tests/check.py; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


def cell_findings(tmp_path: Path, files: dict[str, str]) -> list[Finding]:
    task_dir = write_task(tmp_path / "bench" / "word-counts", files)
    task = load_task(task_dir, bench_root=task_dir.parent)
    base = {"task_id": task.task_id, "source": "static", "attempt": "a1"}
    common = {"hints": None, "sandbox": "auto", "blobs": BlobStore(tmp_path / "blobs")}
    _, records = static_cell(task, base, execution_checks=True, **common)  # type: ignore[arg-type]
    found = [Finding.model_validate(f) for f in records]
    return [f for f in found if f.subcategory == "INST-CONTRADICT"]


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_a_run_that_logs_the_tested_file_missing_makes_it_executed(tmp_path: Path) -> None:
    [finding] = cell_findings(tmp_path, RUN_TASK)
    assert (finding.evidence_tier, finding.severity) == ("executed", "High")
    assert finding.tier_reason == "absence claim, shown by a run in the task's environment"
    [shown] = [e for e in finding.evidence if e.file == "logs/null_agent.log"]
    assert "/app/word_counts.csv" in shown.snippet and "No such file" in shown.snippet


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_a_run_where_the_tested_file_is_there_keeps_it_assumed(tmp_path: Path) -> None:
    [finding] = cell_findings(tmp_path, {**RUN_TASK, "tests/test.sh": MAKES_IT})
    assert (finding.evidence_tier, finding.severity) == ("assumed", "Low")
    assert not any(e.file.startswith("logs/") for e in finding.evidence)
