"""Reference builders: real repositories, scripted write-out, expected finder answers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metaeval.agents.scripted import ScriptedAgent
from metaeval.agents.types import Limits, Task
from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.pack.load import load_pack
from metaeval.protocols.buildfind.pack.reference_builders import (
    REFERENCE_BUILDERS,
    gold_answer_map,
    load_expected_answers,
    reference_actions,
    reference_agent,
    reference_dir,
    reference_files,
    reference_finder_answers,
)
from metaeval.protocols.buildfind.pack.schema import PackTask
from metaeval.sandbox.workspace import Workspace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "buildfind-pack"
PACK = load_pack(EXAMPLE)
TASKS = sorted(PACK.tasks)
CELLS = [(task, builder) for task in TASKS for builder in REFERENCE_BUILDERS]

# The divergent builder's off-spec questions, as documented in examples/buildfind-pack/README.md:
# question id -> the answer its artifact supports (None: the behavior is left out).
DIVERGENT = {
    "kvstore-wal": {"q08": "A", "q09": "A", "q12": None, "q13": None},
    "http-router": {"q04": "B", "q07": "B", "q09": None, "q13": None},
}


def _task(task_id: str) -> PackTask:
    return PACK.tasks[task_id]


def _files_on_disk(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


# --- the repositories themselves ------------------------------------------------------------


@pytest.mark.parametrize(("task_id", "builder"), CELLS)
def test_reference_repo_passes_the_compile_probe_in_a_copy(tmp_path, task_id, builder):
    source = reference_dir(_task(task_id), builder)
    copy = tmp_path / "artifact"
    shutil.copytree(source, copy)
    assert _task(task_id).config.compile_probe == "python -m compileall -q ."
    result = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "."],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert list(copy.rglob("*.pyc"))  # it really compiled something
    assert not list(source.rglob("__pycache__"))  # the stored repo stays clean


@pytest.mark.parametrize(("task_id", "builder"), CELLS)
def test_reference_repo_is_small_and_shaped_as_described(task_id, builder):
    files = reference_files(_task(task_id), builder)
    lines = sum(text.count("\n") for text in files.values())
    assert 100 <= lines <= 360, lines
    package = {"kvstore-wal": "kvwal", "http-router": "minirouter"}[task_id]
    modules = {
        "kvstore-wal": ["errors.py", "store.py", "wal.py"],
        "http-router": ["http.py", "middleware.py", "router.py"],
    }[task_id]
    assert {f"{package}/{m}" for m in ["__init__.py", *modules]} <= set(files)
    assert ("README.md" in files) == (builder != "terse")
    if builder == "terse":
        assert not any('"""' in text for text in files.values())  # no docstrings


# --- scripted write-out ---------------------------------------------------------------------


@pytest.mark.parametrize(("task_id", "builder"), CELLS)
def test_reference_actions_write_exactly_the_repo_then_submit(task_id, builder):
    task = _task(task_id)
    actions = reference_actions(task, builder)
    on_disk = _files_on_disk(reference_dir(task, builder))
    assert actions[-1] == ("submit", {"answer": "done"})
    writes = actions[:-1]
    assert {tool for tool, _ in writes} == {"write_file"}
    assert [args["path"] for _, args in writes] == sorted(on_disk)
    for _, args in writes:
        assert args["content"].encode("utf-8") == on_disk[args["path"]]


def test_reference_files_skip_build_outputs(tmp_path):
    pack_root = tmp_path / "pack"
    shutil.copytree(EXAMPLE, pack_root)
    task = load_pack(pack_root).task("kvstore-wal")
    repo = reference_dir(task, "terse")
    subprocess.run([sys.executable, "-m", "compileall", "-q", "."], cwd=repo, check=True)
    assert list(repo.rglob("*.pyc"))
    assert set(reference_files(task, "terse")) == set(_files_on_disk(repo))


@pytest.mark.parametrize(("task_id", "builder"), CELLS)
def test_reference_agent_reproduces_the_repo_byte_for_byte(tmp_path, task_id, builder):
    task = _task(task_id)
    agent = reference_agent(builder)
    assert isinstance(agent, ScriptedAgent) and callable(agent.actions)
    workspace = Workspace.create(tmp_path / "ws")
    run_task = Task(
        id=f"build-{task_id}",
        instruction="Build the repository described by the specification.",
        allow_write=True,
        metadata={"pack_task_root": str(task.root), "task_id": task_id},
    )
    result = agent.run(run_task, workspace, Limits(max_steps=50))
    assert (result.status, result.stop_reason, result.submission) == ("ok", "submitted", "done")
    expected = _files_on_disk(reference_dir(task, builder))
    assert workspace.list_files() == sorted(expected)
    assert sorted(result.files_produced) == sorted(expected)
    for rel, data in expected.items():
        assert (workspace.path / rel).read_bytes() == data


def test_one_agent_serves_every_task(tmp_path):
    agent = reference_agent("documented")
    for task_id in TASKS:
        task = _task(task_id)
        workspace = Workspace.create(tmp_path / task_id)
        run_task = Task(
            id=task_id,
            instruction="build",
            allow_write=True,
            metadata={"pack_task_root": str(task.root), "task_id": task_id},
        )
        assert agent.run(run_task, workspace, Limits()).status == "ok"
        assert "README.md" in workspace.list_files()


def test_reference_agent_without_write_permission_writes_nothing(tmp_path):
    task = _task("kvstore-wal")
    workspace = Workspace.create(tmp_path / "ws")
    run_task = Task(id="t", instruction="build", metadata={"pack_task_root": str(task.root)})
    result = reference_agent("terse").run(run_task, workspace, Limits(max_steps=50))
    assert workspace.list_files() == []
    assert result.status == "ok"  # the script still submits; the artifact is simply empty


def test_bad_builder_and_metadata_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown reference builder 'fancy'"):
        reference_agent("fancy")
    with pytest.raises(ConfigError, match="unknown reference builder"):
        reference_actions(_task("http-router"), "fancy")
    workspace = Workspace.create(tmp_path / "ws")
    with pytest.raises(ConfigError) as info:
        reference_agent("terse").run(Task(id="t", instruction="x"), workspace, Limits())
    assert info.value.field == "metadata.pack_task_root"


# --- expected answers -----------------------------------------------------------------------


def test_gold_answer_map():
    task = _task("kvstore-wal")
    gold = gold_answer_map(task)
    assert list(gold) == [q.id for q in task.questions]
    assert gold["q01"] == "C" and gold["q10"] == "A"


@pytest.mark.parametrize("task_id", TASKS)
def test_expected_answers_cover_every_question_for_every_builder(task_id):
    task = _task(task_id)
    question_ids = [q.id for q in task.questions]
    expected = load_expected_answers(task)
    assert set(expected) == set(REFERENCE_BUILDERS)
    for builder in REFERENCE_BUILDERS:
        answers = reference_finder_answers(task, builder)
        assert list(answers) == question_ids and len(answers) == 15
        assert set(answers.values()) <= {"A", "B", "C", "D", None}


@pytest.mark.parametrize("task_id", TASKS)
def test_expected_answers_agree_with_gold_except_documented_divergences(task_id):
    task = _task(task_id)
    gold = gold_answer_map(task)
    assert reference_finder_answers(task, "documented") == gold
    assert reference_finder_answers(task, "terse") == gold
    divergent = reference_finder_answers(task, "divergent")
    differing = {qid: answer for qid, answer in divergent.items() if answer != gold[qid]}
    assert differing == DIVERGENT[task_id]
    # two behaviors left out, two implemented differently
    assert sorted(answer is None for answer in differing.values()) == [False, False, True, True]


def test_pack_readme_documents_the_divergent_questions():
    readme = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    for task_id, affected in DIVERGENT.items():
        section = readme.split(f"### {task_id}, divergent", 1)[1].split("###", 1)[0]
        rows = re.findall(r"^\| (q\d\d) \|", section, flags=re.MULTILINE)
        assert rows == sorted(affected)


def test_expected_answers_file_is_checked(tmp_path):
    pack_root = tmp_path / "pack"
    shutil.copytree(EXAMPLE, pack_root)
    task = load_pack(pack_root).task("http-router")
    path = task.root / "reference" / "expected_answers.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("q15: B}", "q15: E}", 1), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_expected_answers(task)
    assert (info.value.file, info.value.field) == (str(path), "documented.q15")
    path.write_text(text.replace(", q15: B}", "}", 1), encoding="utf-8")
    with pytest.raises(ConfigError, match="question not covered"):
        load_expected_answers(task)
    path.unlink()
    with pytest.raises(ConfigError, match="missing expected answers file"):
        reference_finder_answers(task, "terse")


# --- honesty: the expected answers match what the code does ---------------------------------

KV_PROBE = """
import json, os, struct, sys, tempfile
import kvwal
seen = {}
fsyncs = []
real_fsync = os.fsync
os.fsync = lambda fd: (fsyncs.append(fd), real_fsync(fd))[1]
d = tempfile.mkdtemp()
db = kvwal.KVStore(d)
db.put(b"b", b"2"); db.put(b"a", b"1")
fsyncs.clear()
for i in range(13):
    db.put(b"k%d" % i, b"v")
seen["q08"] = {13: "A", 1: "C"}.get(len(fsyncs), len(fsyncs))
try:
    db.get(b"missing")
except kvwal.KeyNotFoundError as exc:
    seen["q01"] = "C" if isinstance(exc, KeyError) else "?"
seen["q12"] = ("D" if db.keys()[:2] == [b"a", b"b"] else "?") if hasattr(db, "keys") else None
if hasattr(db, "snapshot"):
    snap = db.snapshot(); db.put(b"late", b"x")
    seen["q13"] = "B" if b"late" not in snap else "A"
else:
    seen["q13"] = None
db.close()
log = os.path.join(d, "data.wal")
good = os.path.getsize(log)
with open(log, "ab") as f:
    f.write(b"\\x00torn")
try:
    kvwal.KVStore(d).close()
    seen["q09"] = "D" if os.path.getsize(log) == good else "?"
except kvwal.KVError:
    seen["q09"] = "A"
print(json.dumps(seen))
"""

ROUTER_PROBE = """
import json
from minirouter import Request, Response, Router
seen = {}
order = []
def layer(tag):
    def mw(request, nxt):
        order.append(tag); response = nxt(request); order.append(tag); return response
    return mw
r = Router()
r.add("GET", "/users", lambda q: "list")
r.add("GET", "/items/{n:int}", lambda q: {"n": q.params["n"]})
r.use(layer("a")); r.use(layer("b"))
r.handle(Request("GET", "/users"))
seen["q04"] = {"abba": "A", "baab": "B"}.get("".join(order), order)
resp = r.handle(Request("GET", "/users/?x=1"))
if resp.status == 308:
    seen["q07"] = "D" if resp.headers["Location"] == "/users?x=1" else "?"
else:
    seen["q07"] = "B" if resp.body == b"list" else resp.status
seen["q02"] = "A" if r.handle(Request("GET", "/items/abc")).status == 404 else "?"
query = getattr(Request("GET", "/?tag=a&tag=b&empty="), "query", None)
seen["q09"] = None if query is None else ("A" if query == {"tag": ["a", "b"], "empty": [""]} else "?")
if hasattr(r, "url_for"):
    r.add("GET", "/u/{id:int}", lambda q: "", name="user")
    seen["q13"] = "C" if r.url_for("user", id=3, tab="x") == "/u/3?tab=x" else "?"
else:
    seen["q13"] = None
resp = r.handle(Request("DELETE", "/users"))
seen["q03"] = "D" if (resp.status, resp.headers.get("Allow")) == (405, "GET, HEAD") else "?"
print(json.dumps(seen))
"""


@pytest.mark.parametrize(("task_id", "builder"), CELLS)
def test_reference_code_behaves_as_the_expected_answers_say(tmp_path, task_id, builder):
    task = _task(task_id)
    copy = tmp_path / "artifact"
    shutil.copytree(reference_dir(task, builder), copy)
    probe = KV_PROBE if task_id == "kvstore-wal" else ROUTER_PROBE
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(probe)],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    observed = json.loads(result.stdout)
    expected = reference_finder_answers(task, builder)
    assert observed == {qid: expected[qid] for qid in observed}
