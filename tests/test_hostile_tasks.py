"""Hostile Harbor tasks and task packs against the real CLI, the real loader and real bwrap.

The corpus (tests/hostile_corpus.py) is built in tmp dirs: marker strings sit in files in a
temporary HOME and in a directory outside every input, and each hostile input tries to get
one of them read, copied, bound or executed, or to crash or hang metaeval. The end-to-end
tests run `metaeval audit run --static-only` (static and execution checks, so bubblewrap
runs every oracle and null agent) and `metaeval buildfind validate` as subprocesses with
that HOME and assert:

- no marker appears in the run directory, stdout or stderr;
- every hostile input gets its clear finding or error (`expect` in the corpus);
- no traceback is printed; nothing is written outside the run directory (the inputs, the
  marker directories and TMPDIR are unchanged afterwards);
- a rerun (resume) retries nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from metaeval.protocols.audit.cells import static as static_cell
from metaeval.protocols.audit.run import AuditRun
from metaeval.protocols.audit.settings import AuditSettings
from metaeval.protocols.audit.static_checks import run_static_checks_report
from metaeval.protocols.audit.task_view import load_task
from metaeval.protocols.buildfind.pack.load import validate_pack
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.sandbox.bwrap import bwrap_available
from metaeval.tasks.harbor_root import seed_app
from metaeval.tasks.reward import MAX_REWARD_BYTES, read_reward
from metaeval.tasks.safe_files import remove_tree, walk_tree
from metaeval.tasks.toml_values import value_problems
from metaeval.tasks.tree_copy import copy_tree
from metaeval.transient import is_transient

sys.path.insert(0, str(Path(__file__).parent))
from hostile_corpus import (  # noqa: E402
    HOSTILE_PACKS,
    HOSTILE_TASKS,
    base_task,
    build_bench,
    fifo,
    link,
    nested_dirs,
    plant_markers,
    write,
)

REAL_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


@pytest.fixture(autouse=True)
def _remove_deep_trees(tmp_path: Path):
    """Remove each test's tree iteratively: pytest's own cleanup of old temp dirs recurses
    and fails on the 1500-level trees these tests build."""
    yield
    remove_tree(tmp_path)


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    if not bwrap_available():
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail("METAEVAL_REQUIRE_BWRAP=1 but bubblewrap cannot run on this machine")
        pytest.skip("bubblewrap (bwrap) is not usable on this machine")


def hostile_env(base: Path, home: Path) -> dict[str, str]:
    """The environment of a metaeval subprocess: the temporary HOME, a private TMPDIR."""
    tmp = base / "tmpdir"
    tmp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != bwrap_mod.FORCE_FALLBACK_ENV}
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        # the stdlib-only python for task roots is cached outside the inputs (real cache)
        METAEVAL_BARE_PYTHON_DIR=str(REAL_CACHE / "metaeval" / "bare-python"),
        COLUMNS="200",
    )
    return env


def cli(*args: str, env: dict[str, str], timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def snapshot(base: Path, exclude: set[str]) -> dict[str, str]:
    """Every entry below `base` (not following links) -> its kind and content hash."""
    found: dict[str, str] = {}
    for entry in walk_tree(base):
        if entry.rel.split("/", 1)[0] in exclude:
            continue
        if entry.kind == "file":
            found[entry.rel] = hashlib.sha256(entry.path.read_bytes()).hexdigest()
        elif entry.kind in ("link", "link_dir", "outside_link", "dangling_link"):
            found[entry.rel] = "link:" + os.readlink(entry.path)
        else:
            found[entry.rel] = entry.kind
    return found


def files_containing(root: Path, token: str) -> list[str]:
    needle = token.encode()
    hits = []
    for entry in walk_tree(root):
        assert entry.kind in ("file", "dir"), f"unexpected {entry.kind} in the run dir: {entry.rel}"
        if entry.kind == "file" and needle in entry.path.read_bytes():
            hits.append(entry.rel)
    return hits


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def final_records(run_dir: Path) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """Static cell record and its findings per task (latest record, matching attempt)."""
    cells = {c["task_id"]: c for c in jsonl(run_dir / "audits.jsonl") if c["source"] == "static"}
    findings: dict[str, list[dict]] = {task: [] for task in cells}
    for finding in jsonl(run_dir / "findings.jsonl"):
        cell = cells.get(finding["task_id"])
        if cell is not None and finding.get("attempt") == cell.get("attempt"):
            findings[finding["task_id"]].append(finding)
    return cells, findings


# --------------------------------------------------------------------------- end to end


@pytest.mark.bwrap
@pytest.mark.timeout(2400)
def test_hostile_benchmark_audit_leaks_nothing_and_reports_every_input(
    sandboxed: None, tmp_path: Path
) -> None:
    markers = plant_markers(tmp_path)
    bench = build_bench(tmp_path, markers)
    env = hostile_env(tmp_path, markers.home)
    run_dir = tmp_path / "run"
    before = snapshot(tmp_path, exclude={"run", "tmpdir"})

    started = time.monotonic()
    first = cli("audit", "run", str(bench), "--static-only", "-o", str(run_dir), env=env)
    elapsed = time.monotonic() - started
    output = first.stdout + first.stderr
    assert first.returncode == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert markers.token not in output
    assert files_containing(run_dir, markers.token) == []

    cells, findings = final_records(run_dir)
    assert sorted(cells) == sorted(t.name for t in HOSTILE_TASKS)
    missed = [
        f"{t.name} ({t.what}): {[f['title'] for f in findings[t.name]]} / "
        f"{json.dumps(cells[t.name].get('execution'))[:400]}"
        for t in HOSTILE_TASKS
        if not t.expect(findings[t.name], cells[t.name])
    ]
    assert missed == [], "\n".join(missed)
    for task_id, cell in cells.items():  # every input is handled: no error cell, no infra
        assert cell["status"] == "ok" and cell["infra_error"] is False, (task_id, cell)
        assert "check_errors" not in cell, (task_id, cell["check_errors"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["infra_errors"] == 0 and summary["ran"] == len(HOSTILE_TASKS)
    print(f"\n{len(HOSTILE_TASKS)} hostile tasks audited in {elapsed:.1f} s")

    # nothing written outside the run directory: inputs, markers, HOME and TMPDIR unchanged
    assert snapshot(tmp_path, exclude={"run", "tmpdir"}) == before
    assert list((tmp_path / "tmpdir").iterdir()) == []

    # resume: a finished run retries nothing and writes no new cell
    lines = len((run_dir / "audits.jsonl").read_text().splitlines())
    second = cli("audit", "run", str(bench), "--static-only", "-o", str(run_dir), env=env)
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
    assert "Traceback" not in second.stdout + second.stderr
    assert json.loads((run_dir / "summary.json").read_text())["ran"] == 0
    assert len((run_dir / "audits.jsonl").read_text().splitlines()) == lines
    assert files_containing(run_dir, markers.token) == []


@pytest.mark.parametrize("pack_case", HOSTILE_PACKS, ids=lambda p: p.name)
def test_hostile_pack_is_refused_with_the_file_named(tmp_path: Path, pack_case: Any) -> None:
    markers = plant_markers(tmp_path)
    pack = tmp_path / "pack"
    pack_case.build(pack, markers)
    before = snapshot(tmp_path, exclude={"tmpdir"})
    env = hostile_env(tmp_path, markers.home)
    result = cli("buildfind", "validate", str(pack), env=env, timeout=120)
    output = result.stdout + result.stderr
    flat = " ".join(output.split())
    assert result.returncode == 1, output
    assert "Traceback" not in output
    assert markers.token not in output
    assert pack_case.file in flat and pack_case.words in flat, (pack_case.what, output)
    assert snapshot(tmp_path, exclude={"tmpdir"}) == before
    problems = validate_pack(pack)
    assert any(p.file == pack_case.file and pack_case.words in p.message for p in problems)


# --------------------------------------------------------------------------- the reward reader


def test_reward_reader_refuses_links_fifos_directories_and_huge_files(tmp_path: Path) -> None:
    markers = plant_markers(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    link(logs / "reward.txt", markers.netrc)
    value, source, error = read_reward(logs)
    assert (value, source) == (None, "reward.txt") and "is a symlink" in error
    assert markers.token not in error

    (logs / "reward.txt").unlink()
    link(logs / "reward.json", markers.secret)
    assert "is a symlink" in read_reward(logs)[2]
    (logs / "reward.json").unlink()

    fifo(logs / "reward.txt")
    started = time.monotonic()
    assert read_reward(logs)[2] == "reward.txt is not a regular file (FIFO)"
    assert time.monotonic() - started < 30  # opening the FIFO did not block
    (logs / "reward.txt").unlink()

    (logs / "reward.txt").mkdir()
    assert read_reward(logs)[2] == "reward.txt is not a regular file (directory)"
    (logs / "reward.txt").rmdir()

    write(logs / "reward.txt", "1" * (MAX_REWARD_BYTES + 1))
    assert read_reward(logs)[2] == f"reward.txt is larger than {MAX_REWARD_BYTES} bytes"
    write(logs / "reward.txt", "inf\n")
    assert read_reward(logs)[2] == "reward.txt holds 'inf', not a finite number"
    (logs / "reward.txt").unlink()

    write(logs / "reward.json", "[" * 5000 + "]" * 5000)
    assert read_reward(logs)[2] == "reward.json is nested too deeply to read"
    write(logs / "reward.json", '{"reward": 1e999}')
    assert read_reward(logs)[2] == "reward.json holds a reward that is not a finite number"
    write(logs / "reward.json", '{"reward": 0.5}')
    assert read_reward(logs) == (0.5, "reward.json", None)

    # the logs directory itself replaced by a link is refused too
    moved = tmp_path / "elsewhere"
    write(moved / "reward.txt", "1\n")
    link(tmp_path / "logs-link", moved)
    assert read_reward(tmp_path / "logs-link")[0] is None


# --------------------------------------------------------------------------- loader and copies


def test_loader_records_links_leaving_the_task_and_special_files(tmp_path: Path) -> None:
    markers = plant_markers(tmp_path)
    task_dir = base_task(tmp_path / "bench" / "t")
    link(task_dir / "tests" / "test.sh", markers.script)
    link(task_dir / "environment" / "key", markers.ssh_key)
    link(task_dir / "environment" / "alias.txt", "input.txt")  # inside: fine
    link(task_dir / "solution", markers.outside / "solution")
    fifo(task_dir / "environment" / "pipe")
    task = load_task(task_dir, bench_root=tmp_path / "bench")
    assert task.outside_links == [
        f"tests/test.sh -> {markers.script}",
        f"solution -> {markers.outside / 'solution'}",
        f"environment/key -> {markers.ssh_key}",
    ]
    assert task.special_files == ["environment/pipe (FIFO)"]
    assert task.file("environment/alias.txt").text == "input\n"
    assert all(markers.token not in f.text for f in task.files)
    findings = run_static_checks_report(task).findings
    links = [f for f in findings if f.subcategory == "ENV-PATH" and "symlink" in f.title]
    assert len(links) == 1 and "tests/test.sh" in links[0].description
    assert all(markers.token not in f.model_dump_json() for f in findings)


def test_app_seeding_and_staged_mounts_copy_only_files_inside_the_task(tmp_path: Path) -> None:
    markers = plant_markers(tmp_path)
    task_dir = base_task(tmp_path / "t")
    link(task_dir / "environment" / "key", markers.ssh_key)
    link(task_dir / "environment" / "alias.txt", "input.txt")
    link(task_dir / "environment" / "up", "../solution/solve.sh")  # inside the task
    fifo(task_dir / "environment" / "pipe")
    write(task_dir / "environment" / "Dockerfile", "FROM scratch\n")
    notes = seed_app(task_dir, tmp_path / "app")
    app = tmp_path / "app"
    assert sorted(p.name for p in app.iterdir()) == ["alias.txt", "input.txt", "up"]
    assert not any(p.is_symlink() for p in app.iterdir())
    assert (app / "up").read_text() == "echo done > /app/out.txt\n"
    assert notes == [
        f"environment/key: symlink leading outside ({markers.ssh_key})",
        "environment/pipe: not a regular file (FIFO), not opened",
    ]
    # environment/ itself a link out of the task: /app stays empty
    link(task_dir / "environment", markers.outside / "env")
    notes = seed_app(task_dir, tmp_path / "app2")
    assert list((tmp_path / "app2").iterdir()) == []
    assert notes == [f"environment: symlink leading outside ({markers.outside / 'env'})"]


def test_copy_tree_and_walk_handle_1500_levels_of_nesting(tmp_path: Path) -> None:
    (nested_dirs(tmp_path / "src", 1500) / "leaf.txt").write_text("x\n")
    entries = walk_tree(tmp_path / "src")
    assert entries[-1].rel.endswith("d/leaf.txt") and len(entries) == 1501
    assert copy_tree(tmp_path / "src", tmp_path / "dst", boundary=tmp_path / "src") == []
    assert (tmp_path / "dst" / "/".join(["d"] * 1500) / "leaf.txt").read_text() == "x\n"


# --------------------------------------------------------------------------- task.toml values


def test_value_problems_name_key_value_and_expectation() -> None:
    config = {
        "verifier": {"timeout_sec": "sixty", "environment": {"cpus": 0}},
        "agent": {"timeout_sec": float("nan"), "network_mode": "offline"},
        "environment": {
            "memory_mb": "2G",
            "cpus": [1, 2],
            "allow_internet": "yes",
            "storage_mb": 9223372036854775807,
            "memory": "lots",
            "build_timeout_sec": -5,
            "gpus": 0,  # valid
            "healthcheck": {"retries": -1},
        },
        "steps": [{"agent": {"timeout_sec": True}}],
    }
    shown = sorted(str(p) for p in value_problems(config))
    assert shown == sorted(
        [
            'verifier.timeout_sec = "sixty" (expected a number of seconds greater than 0)',
            "verifier.environment.cpus = 0 (expected a whole number of CPUs from 1 to 4096)",
            "agent.timeout_sec = nan (expected a number of seconds greater than 0)",
            'agent.network_mode = "offline" (expected one of "public", "no-network", "allowlist")',
            'environment.memory_mb = "2G" (expected a whole number of megabytes from 1 to 1073741824)',
            "environment.cpus = [1, 2] (expected a whole number of CPUs from 1 to 4096)",
            'environment.allow_internet = "yes" (expected true or false)',
            "environment.storage_mb = 9223372036854775807 (expected a whole number of megabytes from 1 to 1073741824)",
            'environment.memory = "lots" (expected a size such as "2G")',
            "environment.build_timeout_sec = -5 (expected a number of seconds greater than 0)",
            "environment.healthcheck.retries = -1 (expected a whole number, at least 0)",
            "steps[0].agent.timeout_sec = true (expected a number of seconds greater than 0)",
        ]
    )
    assert value_problems({"environment": {"memory": "2G", "cpus": 2, "memory_mb": 4096}}) == []


def test_huge_task_toml_loads_and_checks_in_linear_time(tmp_path: Path) -> None:
    """100,000 keys (1.8 MB): the unknown-key lookup used to be quadratic (20,000 keys: 38 s)."""
    task_dir = base_task(tmp_path / "t", toml="".join(f"key_{i} = {i}\n" for i in range(100_000)))
    started = time.monotonic()
    task = load_task(task_dir)
    report = run_static_checks_report(task)
    elapsed = time.monotonic() - started
    assert len(task.unknown_keys) == 100_000 and report.errors == {}
    unknown = [f for f in report.findings if "Harbor ignores" in f.title]
    assert len(unknown) == 1 and "and 99980 more" in unknown[0].description
    assert len(unknown[0].evidence) == 8
    assert elapsed < 60, f"{elapsed:.1f} s for 100,000 keys"


# --------------------------------------------------------------------------- failures and resume


def test_deterministic_failures_are_final_and_transient_ones_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = tmp_path / "bench"
    for name in ("recursion", "flaky", "fine"):
        base_task(bench / name)
    real = static_cell.run_static_checks_report
    calls: dict[str, int] = {}

    def checks(task: Any, *args: Any) -> Any:
        calls[task.task_id] = calls.get(task.task_id, 0) + 1
        if task.task_id == "recursion":
            raise RecursionError("maximum recursion depth exceeded")
        if task.task_id == "flaky" and calls["flaky"] == 1:
            raise ConnectionResetError(104, "Connection reset by peer")
        return real(task, *args)

    monkeypatch.setattr(static_cell, "run_static_checks_report", checks)
    settings = AuditSettings(  # one job in flight: the cells run in this process
        bench_dir=bench, run_dir=tmp_path / "run", static_only=True, execution_checks=False
    )
    first = AuditRun(settings).run()
    cells = {c["task_id"]: c for c in jsonl(tmp_path / "run" / "audits.jsonl")}
    assert cells["recursion"]["status"] == "error" and cells["recursion"]["infra_error"] is False
    assert cells["recursion"]["error"] == (
        "deterministic failure, not retried: RecursionError: maximum recursion depth exceeded"
    )
    assert cells["flaky"]["infra_error"] is True
    assert "Traceback" in cells["flaky"]["error"]  # the executor keeps the transient trace
    assert cells["fine"]["status"] == "ok"
    assert first["infra_errors"] == 1

    second = AuditRun(settings).run()
    assert second["ran"] == 1  # only the transient failure is retried
    assert calls == {"recursion": 1, "flaky": 2, "fine": 1}
    assert second["infra_errors"] == 0
    assert is_transient(TimeoutError()) and not is_transient(ValueError("bad toml"))
    assert is_transient(OSError(28, "No space left on device"))
    assert not is_transient(OSError(36, "File name too long"))


def test_hints_file_linking_outside_is_refused_unread(tmp_path: Path) -> None:
    markers = plant_markers(tmp_path)
    bench = tmp_path / "bench"
    base_task(bench / "t")
    write(markers.outside / "hints.yaml", f"general: {markers.token}-hints\nbad: [\n")
    link(bench / "benchguard_hints.yaml", markers.outside / "hints.yaml")
    env = hostile_env(tmp_path, markers.home)
    run_dir = tmp_path / "run"
    result = cli(
        "audit", "run", str(bench), "--static-only", "--no-execution", "-o", str(run_dir), env=env
    )
    output = result.stdout + result.stderr
    flat = " ".join(output.split())
    assert result.returncode == 2, output
    assert "Traceback" not in output and markers.token not in output
    assert "benchguard_hints.yaml: symlink leading outside the benchmark" in flat
    assert not run_dir.exists() or files_containing(run_dir, markers.token) == []


@pytest.mark.parametrize("name", ["solution.sh", "run-tests.sh", "Dockerfile", "task.yaml"])
def test_convert_refuses_source_files_linking_outside(tmp_path: Path, name: str) -> None:
    markers = plant_markers(tmp_path)
    src = tmp_path / "tb1" / "hello"
    write(src / "task.yaml", "instruction: Write hello.txt.\n")
    write(src / "solution.sh", "echo hello > hello.txt\n")
    write(src / "run-tests.sh", "test -f hello.txt\n")
    write(src / "Dockerfile", "FROM python:3.12-slim\n")
    write(src / "tests" / "test_outputs.py", "print('ok')\n")
    fifo(src / "tests" / "pipe")
    link(src / name, markers.netrc)
    env = hostile_env(tmp_path, markers.home)
    result = cli("audit", "convert", str(src), str(tmp_path / "out"), env=env, timeout=120)
    output = result.stdout + result.stderr
    flat = " ".join(output.split())
    assert result.returncode == 2, output
    assert "Traceback" not in output and markers.token not in output
    assert f"{name}: symlink leading outside the task" in flat, output
    out = tmp_path / "out"
    assert not out.exists() or files_containing(out, markers.token) == []


def test_convert_skips_special_files(tmp_path: Path) -> None:
    src = tmp_path / "tb1" / "hello"
    write(src / "task.yaml", "instruction: Write hello.txt.\n")
    write(src / "solution.sh", "echo hello > hello.txt\n")
    write(src / "tests" / "test_outputs.py", "print('ok')\n")
    fifo(src / "tests" / "pipe")
    fifo(src / "extra.fifo")
    result = cli("audit", "convert", str(src), str(tmp_path / "out"), env=dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (tmp_path / "out" / "tests" / "pipe").exists()
    assert not (tmp_path / "out" / "environment" / "extra.fifo").exists()
    assert (tmp_path / "out" / "tests" / "test_outputs.py").is_file()
