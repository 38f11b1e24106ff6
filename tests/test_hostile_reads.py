"""Files read on an agent's behalf never lead out of its workspace (issue 31, items 2 and 3).

An agent's own sandboxed bash can create symlinks, FIFOs and huge sparse files in its
workspace; an agent-results folder handed to the audit can be a symlink. Each test plants a
secret marker file outside the tree (in tmp_path), makes the link for real, runs the real
tool, agent or protocol, and checks that the marker reaches no tool output, no model request,
and no file of the run (records, blobs, reports), and that what was refused is named.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from metaeval.agents.toolloop import ToolLoopAgent
from metaeval.agents.tools import MAX_FILE_BYTES, run_tool
from metaeval.agents.types import Limits, Task
from metaeval.errors import MetaevalError
from metaeval.models.registry import register_provider
from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import ModelRequest
from metaeval.protocols.audit.task_view import load_task
from metaeval.sandbox.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
AUDIT_BENCH = ROOT / "examples" / "audit-bench"
PACK = ROOT / "examples" / "buildfind-pack"
PREFIX = "HOSTILE-READ-MARKER-"
MARKER = f"{PREFIX}{uuid.uuid4().hex}"  # searched for by PREFIX: the full marker is in no call
BUDGET = 64 * 1024


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside every tree under test, holding the secret."""
    folder = tmp_path / "outside"
    (folder / "keys").mkdir(parents=True)
    (folder / "secret.txt").write_text(f"{MARKER}\n")
    (folder / "keys" / "id_test").write_text(f"-----BEGIN KEY-----\n{MARKER}\n")
    return folder


def files_holding(root: Path, needle: str) -> list[str]:
    """Regular files below `root` (symlinks not followed) whose bytes contain `needle`."""
    found = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath, name)
            if stat.S_ISREG(os.lstat(path).st_mode) and needle.encode() in path.read_bytes():
                found.append(str(path.relative_to(root)))
    return found


def tool(ws: Workspace, name: str, **args: Any) -> str:
    """A tool's output as the model receives it, or its error message (also sent back)."""
    try:
        return run_tool(ws, name, args, BUDGET, timeout_s=30, allow_write=True).for_model
    except MetaevalError as exc:
        return f"error: {exc}"


# ------------------------------------------------------------------------------ file tools


def planted_workspace(root: Path, outside: Path) -> Workspace:
    ws = Workspace.create(root)
    (ws.path / "inside.txt").write_text("inside line\n")
    (ws.path / "sub").mkdir()
    os.symlink(outside / "secret.txt", ws.path / "leak.txt")
    os.symlink(os.path.relpath(outside / "secret.txt", ws.path), ws.path / "rel-leak.txt")
    os.symlink(outside / "secret.txt", ws.path / "sub" / "deep-leak.txt")
    os.symlink(outside, ws.path / "leakdir")
    os.symlink(outside / "keys", ws.path / "sub" / "keys")
    os.symlink("/dev/zero", ws.path / "zero")
    os.symlink("inside.txt", ws.path / "alias.txt")  # inside: still read
    os.mkfifo(ws.path / "pipe")
    return ws


@pytest.mark.timeout(60)
def test_file_tools_never_read_through_a_link_out_or_open_a_fifo(tmp_path, outside):
    ws = planted_workspace(tmp_path / "ws", outside)
    seen = {
        "grep-marker": tool(ws, "grep", pattern=PREFIX),
        "grep-all": tool(ws, "grep", pattern="."),
        "grep-sub": tool(ws, "grep", pattern=".", path="sub"),
        "grep-link-file": tool(ws, "grep", pattern=".", path="leak.txt"),
        "grep-link-dir": tool(ws, "grep", pattern=".", path="leakdir"),
        "list-root": tool(ws, "list_dir", path="."),
        "list-sub": tool(ws, "list_dir", path="sub"),
        "list-link-dir": tool(ws, "list_dir", path="leakdir"),
        "list-link-dir-sub": tool(ws, "list_dir", path="sub/keys"),
    }
    for name in (
        "leak.txt",
        "rel-leak.txt",
        "sub/deep-leak.txt",
        "leakdir/secret.txt",
        "sub/keys/id_test",
        str(outside / "secret.txt"),
        "../outside/secret.txt",
        "zero",
        "pipe",
    ):
        seen[f"read {name}"] = tool(ws, "read_file", path=name)
    everything = json.dumps(seen)
    assert MARKER not in everything, everything

    # what stays inside still works: a plain file and a link to it
    assert "inside.txt:1:inside line" in seen["grep-all"]
    assert "alias.txt:1:inside line" in seen["grep-all"]
    assert tool(ws, "read_file", path="alias.txt") == "inside line\n"
    # what was not searched or read is named, with the reason
    assert "leak.txt (symlink leading outside" in seen["grep-all"]
    assert "sub/deep-leak.txt (symlink leading outside" in seen["grep-sub"]
    assert "pipe (not a regular file (FIFO), not opened)" in seen["grep-all"]
    assert f"leakdir (symlink leading outside ({outside}))" in seen["list-root"]
    assert "pipe (not a regular file (FIFO), not opened)" in seen["list-root"]
    assert "alias.txt\n" in seen["list-root"] and "sub/\n" in seen["list-root"]
    for key in ("read leak.txt", "read leakdir/secret.txt", "list-link-dir", "grep-link-dir"):
        assert seen[key].startswith("error: ") and "outside the workspace" in seen[key], key
    assert seen["read pipe"].startswith("error: cannot read pipe:") and "FIFO" in seen["read pipe"]


@pytest.mark.timeout(60)
def test_a_huge_sparse_file_is_read_only_up_to_the_cap(tmp_path):
    ws = Workspace.create(tmp_path / "ws")
    big = ws.path / "big.log"
    with open(big, "wb") as handle:
        handle.write(b"first line\nsecond line\n")
        handle.truncate(3 * 1024**3)  # 3 GiB, almost all of it a hole
    out = run_tool(ws, "read_file", {"path": "big.log", "limit": 1}, BUDGET, 30, True)
    assert out.text == "first line\n"
    assert f"larger than {MAX_FILE_BYTES} bytes" in out.note
    searched = tool(ws, "grep", pattern="first")
    assert searched.startswith("(no matches)") and "big.log (larger than" in searched


# ------------------------------------------------------------------------------ toolloop


def link_making_steps(secret: Path, outside: Path, final: list[tuple[str, dict]]) -> list:
    """Tool calls: bash makes the links (and tries to read the secret itself), the file tools
    then try every way through them; `final` ends the run."""
    make = (
        f"ln -s {secret} leak.txt && ln -s {outside} leakdir && mkfifo pipe && mkdir -p sub && "
        f"ln -s {secret} sub/deep.txt && ln -s /dev/zero zero && ls -l; cat {secret}; true"
    )
    return [
        ("bash", {"command": make}),
        ("grep", {"pattern": PREFIX}),
        ("grep", {"pattern": "."}),
        ("read_file", {"path": "leak.txt"}),
        ("read_file", {"path": "sub/deep.txt"}),
        ("read_file", {"path": "leakdir/secret.txt"}),
        ("read_file", {"path": "pipe"}),
        ("read_file", {"path": "zero"}),
        ("list_dir", {"path": "leakdir"}),
        ("list_dir", {"path": "."}),
        *final,
    ]


def scripted(steps: list[tuple[str, dict]], seen: list[ModelRequest]):
    """A responder playing `steps` in order, one per model call (native tool calls)."""

    def respond(request: ModelRequest) -> dict[str, Any]:
        seen.append(request)
        done = sum(1 for m in request.messages if m.role == "tool")
        name, args = steps[min(done, len(steps) - 1)]
        return {"tool_calls": [{"id": f"c{done}", "name": name, "arguments": args}]}

    return respond


def request_text(seen: list[ModelRequest]) -> str:
    return "\n".join(m.content or "" for request in seen for m in request.messages)


@pytest.mark.bwrap
@pytest.mark.timeout(120)
def test_toolloop_agent_cannot_read_the_links_its_own_bash_made(tmp_path, outside):
    seen: list[ModelRequest] = []
    steps = link_making_steps(outside / "secret.txt", outside, [("submit", {"answer": "x"})])
    model = ScriptedModel(scripted(steps, seen), name="scripted/hostile")
    ws = Workspace.create(tmp_path / "ws")
    task = Task(id="t", instruction="look around", allow_write=True)
    result = ToolLoopAgent(model).run(task, ws, Limits(max_steps=len(steps) + 2))
    assert result.status == "ok" and result.submission == "x", result
    # the sandboxed bash really made them (a FIFO, links to the host's secret)
    assert os.readlink(ws.path / "leak.txt") == str(outside / "secret.txt")
    assert stat.S_ISFIFO(os.lstat(ws.path / "pipe").st_mode)
    # ... but could not read the secret itself (the host's /tmp is not in the sandbox) ...
    prompts = request_text(seen)
    assert "No such file or directory" in prompts
    # ... and no tool read it through them: nothing the model saw, nothing in the transcript
    assert MARKER not in prompts
    transcript = json.dumps([e.model_dump(mode="json") for e in result.transcript])
    assert MARKER not in transcript
    assert "leak.txt (symlink leading outside" in prompts and "FIFO" in prompts


@pytest.mark.bwrap
@pytest.mark.timeout(300)
def test_buildfind_builder_links_reach_no_record_blob_or_report(tmp_path, outside):
    """A toolloop builder (a scripted model) links the secret into its artifact with bash and
    tries every file tool on it; the run's records, blobs, tables and reports stay clean,
    and the artifact's validation (lines of code, leakage scan) does not read it either."""
    from metaeval.protocols.buildfind.config import load_config
    from metaeval.protocols.buildfind.finalize import run_and_finalize

    seen: list[ModelRequest] = []
    final = [("write_file", {"path": "main.py", "content": "print('hello')\n"})]
    final.append(("submit", {"answer": "built"}))
    steps = link_making_steps(outside / "secret.txt", outside, final)
    os.symlink(outside / "secret.txt", tmp_path / "unused")  # the secret exists, linkable
    register_provider(
        "hostilebuilder",
        lambda model_id, name, **o: ScriptedModel(scripted(steps, seen), name=name),
        cacheable=False,
    )
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "pack": str(PACK),
                "tasks": ["http-router"],
                "builders": [
                    {
                        "name": "leaky",
                        "agent": "toolloop",
                        "model": "hostilebuilder/b",
                        "max_steps": len(steps) + 2,
                    }
                ],
                "finders": [{"name": "ref", "agent": "reference-finder"}],
                "r_build": 1,
                "r_find": 1,
                "controls": [],
                "concurrency": 1,
            }
        )
    )
    run_dir = tmp_path / "run"
    counts, _ = run_and_finalize(load_config(config), run_dir)
    assert counts["builds_ran"] == 1
    (build,) = [json.loads(x) for x in (run_dir / "builds.jsonl").read_text().splitlines()]
    assert build["status"] == "ok", build
    artifact = run_dir / build["artifact"]
    assert os.readlink(artifact / "leak.txt") == str(outside / "secret.txt")  # made for real
    # the validation lists the builder's own file, not the links leading out
    assert "main.py" in build["validation"]["file_list"]
    assert "leak.txt" not in build["validation"]["file_list"]
    assert MARKER not in request_text(seen)
    assert files_holding(run_dir, MARKER) == []


# ------------------------------------------------------------------------------ agent results


def test_agent_results_folder_linking_out_is_refused_and_noted(tmp_path, outside):
    bench = tmp_path / "bench"
    shutil.copytree(AUDIT_BENCH / "grade-mean", bench / "grade-mean")
    results = tmp_path / "results"
    results.mkdir()
    os.symlink(outside / "keys", results / "grade-mean")  # results/<task> -> "~/.ssh"
    task = load_task(
        bench / "grade-mean", tier="execution", bench_root=bench, agent_results=results
    )
    assert task.by_role("agent") == []
    assert MARKER not in json.dumps([f.text for f in task.files])
    (note,) = [s for s in task.skipped_files if s.startswith("agent/")]
    assert "agent_results/grade-mean/ not read: symlink leading outside the agent results" in note
    assert task.outside_links == []  # the results are not the benchmark's: no task finding

    # a folder on the way linking out (task id group/t), and the default results root
    # (<bench>/agent_results) linking out of the benchmark, are refused the same way
    grouped = tmp_path / "grouped"
    shutil.copytree(AUDIT_BENCH / "grade-mean", grouped / "group" / "t")
    for leaked in (outside / "keys" / "t", outside / "keys" / "group" / "t"):
        leaked.mkdir(parents=True)
        (leaked / "log.txt").write_text(f"{MARKER}\n")
    (tmp_path / "results3").mkdir()
    os.symlink(outside / "keys", tmp_path / "results3" / "group")
    os.symlink(outside / "keys", grouped / "agent_results")
    for given in (tmp_path / "results3", None):
        task = load_task(
            grouped / "group" / "t", tier="execution", bench_root=grouped, agent_results=given
        )
        assert task.by_role("agent") == [], given
        assert any("symlink leading outside" in s for s in task.skipped_files), given

    # links inside the results root still work; links below it that leave it are named
    inside = tmp_path / "results4"
    (inside / "real").mkdir(parents=True)
    (inside / "real" / "program.py").write_text("print(1)\n")
    os.symlink(outside / "secret.txt", inside / "real" / "stolen.txt")
    os.mkfifo(inside / "real" / "pipe")
    os.symlink("real", inside / "grade-mean")
    task = load_task(bench / "grade-mean", tier="execution", bench_root=bench, agent_results=inside)
    assert [f.path for f in task.by_role("agent")] == ["agent/program.py"]
    assert any(
        s.startswith("agent/stolen.txt: symlink leading outside") for s in task.skipped_files
    )
    assert any(s.startswith("agent/pipe: not a regular file (FIFO)") for s in task.skipped_files)
    assert MARKER not in json.dumps([f.text for f in task.files])


def test_audit_execution_tier_never_sends_a_linked_results_folder(tmp_path, outside):
    from metaeval.protocols.audit.run import AuditRun
    from metaeval.protocols.audit.settings import AuditSettings

    results = tmp_path / "agent_results"
    results.mkdir()
    os.symlink(outside / "keys", results / "grade-mean")
    seen: list[ModelRequest] = []

    def respond(request: ModelRequest) -> str:
        seen.append(request)
        return "[]"

    run_dir = tmp_path / "audit"
    settings = AuditSettings(
        bench_dir=AUDIT_BENCH,
        run_dir=run_dir,
        models=["scripted/exec"],
        tier="execution",
        agent_results=results,
        task_filter=["grade-mean"],
        execution_checks=False,
        progress=False,
    )
    model = ScriptedModel(respond, name="scripted/exec")
    summary = AuditRun(settings, models={"scripted/exec": model}).run()
    assert summary["audit_failures"] == []
    prompt = request_text(seen)
    assert seen and MARKER not in prompt
    assert "agent_results/grade-mean/ not read: symlink leading outside the agent results" in prompt
    assert files_holding(run_dir, MARKER) == []
    cells = [json.loads(x) for x in (run_dir / "audits.jsonl").read_text().splitlines()]
    static = next(c for c in cells if c["source"] == "static")
    assert any("symlink leading outside the agent results" in s for s in static["skipped_files"])
