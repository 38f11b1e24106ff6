"""The build check's RUN reads: a RUN command that reads a file under a directory COPY put in
the image, which the build context does not have (found by auditing a real Terminal-Bench 2
task: `COPY scripts/ /app/scripts/` and then `RUN chmod +x /app/scripts/reset-state.sh ...`
with no reset-state.sh in environment/scripts/). The build fails there, so no agent can run.

Clean variants (the file is there, an earlier step creates it, a failure the build ignores, a
step that may create anything, a multi-stage build) must give no finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from metaeval.protocols.audit.static_checks import run_static_checks
from metaeval.protocols.audit.task_view import load_task

DOCKERFILE = """FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends tmux \\
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir pytest==8.3.4
WORKDIR /app
COPY README.md /app/
COPY scripts/ /app/scripts/
RUN chmod +x /app/scripts/reset-state.sh /app/scripts/build.sh \\
    && mkdir -p /app/output
"""


def write_task(root: Path, dockerfile: str, extra: dict[str, str] | None = None) -> Path:
    files = {
        "instruction.md": "# Build\n\nRun `/app/scripts/build.sh` and fix what fails.\n",
        "task.toml": 'version = "1.0"\n',
        "environment/Dockerfile": dockerfile,
        "environment/README.md": "readme\n",
        "environment/scripts/build.sh": "#!/bin/bash\necho build\n",
        "tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
        "solution/solve.sh": "#!/bin/bash\ntrue\n",
        **(extra or {}),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def build_reads(task_dir: Path) -> list:
    task = load_task(task_dir, bench_root=task_dir.parent)
    return [f for f in run_static_checks(task) if "build context does not provide" in f.title]


def test_a_run_reading_a_file_the_context_lacks_is_found(tmp_path: Path) -> None:
    [finding] = build_reads(write_task(tmp_path / "t", DOCKERFILE))
    assert (finding.subcategory, finding.severity) == ("ENV-PATH", "Critical")
    assert "`/app/scripts/reset-state.sh`" in finding.title
    assert "environment/scripts/reset-state.sh" in finding.description
    assert finding.evidence[0].file == "environment/Dockerfile"
    assert finding.evidence[0].line_start == 8
    assert finding.evidence[0].snippet.startswith("RUN chmod +x /app/scripts/reset-state.sh")


def test_a_relative_path_under_the_workdir_is_found_too(tmp_path: Path) -> None:
    dockerfile = DOCKERFILE.replace("/app/scripts/reset-state.sh", "scripts/reset-state.sh")
    [finding] = build_reads(write_task(tmp_path / "t", dockerfile))
    assert "`/app/scripts/reset-state.sh`" in finding.title


def test_copying_the_whole_context_maps_paths_the_same_way(tmp_path: Path) -> None:
    dockerfile = DOCKERFILE.replace("COPY scripts/ /app/scripts/", "COPY . /app")
    [finding] = build_reads(write_task(tmp_path / "t", dockerfile))
    assert "environment/scripts/reset-state.sh" in finding.description


CLEAN = {
    "present": (DOCKERFILE, {"environment/scripts/reset-state.sh": "#!/bin/bash\n"}),
    "created first": (
        DOCKERFILE.replace(
            "RUN chmod", "RUN printf '#!/bin/bash\\n' > /app/scripts/reset-state.sh\nRUN chmod"
        ),
        {},
    ),
    "after a step that may create anything": (
        DOCKERFILE.replace("RUN chmod", "RUN /app/scripts/build.sh\nRUN chmod"),
        {},
    ),
    "an archive ADD may unpack it": (
        DOCKERFILE.replace("COPY README.md /app/", "ADD tools.tar.gz /app/"),
        {"environment/tools.tar.gz": "not really an archive\n"},
    ),
    "failure ignored": (DOCKERFILE.replace("&& mkdir -p /app/output", "|| true"), {}),
    "not the last statement": (
        DOCKERFILE.replace(" \\\n    && mkdir -p /app/output", "; mkdir -p /app/output"),
        {},
    ),
    "multi-stage": (
        "FROM python:3.11-slim AS base\nRUN true\n"
        + DOCKERFILE.replace("FROM python:3.11-slim", "FROM base"),
        {},
    ),
    "a file copied from outside the mapped directory": (
        DOCKERFILE.replace(
            "COPY scripts/ /app/scripts/",
            "COPY scripts/ /app/scripts/\nCOPY README.md /app/scripts/reset-state.sh",
        ),
        {},
    ),
}


@pytest.mark.parametrize("variant", sorted(CLEAN))
def test_clean_variants_give_no_finding(tmp_path: Path, variant: str) -> None:
    dockerfile, extra = CLEAN[variant]
    assert build_reads(write_task(tmp_path / "t", dockerfile, extra)) == []
