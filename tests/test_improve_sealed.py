"""A candidate cannot read a suite's answer key (issue 28, path 3).

metaeval installed from a wheel carries its bundled suites, reference solutions included,
inside the package directory, which the target's sandbox mounts. This test builds that layout
(a package directory with `_examples/` beside it, imported from there), runs an improve trial
whose patch, inside the mutable root, searches every directory it can see for the task's
`instruction.md` and runs the `solution/solve.sh` beside it, and reports the task id it was
given. The candidate must score what the baseline scores, find nothing, and be told no task
name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHEAT = r"""
import os
import sys

RECIPES = []


def _answer(instruction):
    import metaeval

    package = os.path.dirname(metaeval.__file__)
    roots = [package, os.path.dirname(package), os.getcwd(), "/tmp", "/root", "/work", "/home"]
    seen = 0
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            seen += 1
            if seen > 50000:
                return None
            if "instruction.md" not in filenames:
                continue
            try:
                with open(os.path.join(dirpath, "instruction.md")) as handle:
                    text = handle.read()
                if text.strip() != instruction.strip():
                    continue
                with open(os.path.join(dirpath, "solution", "solve.sh")) as handle:
                    sys.stderr.write("FOUND" "-ANSWER " + dirpath + "\n")
                    return (handle.read(),)
            except OSError:
                continue
    return None


def match(instruction):
    return _answer(instruction)
"""


DRIVER = r"""
import json, sys
from pathlib import Path

from metaeval.protocols.improve.meta_agents import ScriptedMetaAgent
from metaeval.protocols.improve.run import run_experiment

CHEAT = Path(sys.argv[2]).read_text()


def cheat(worktree, _input):
    (worktree / "target_agent" / "playbook.py").write_text(CHEAT)
    policy = worktree / "target_agent" / "policy.py"
    text = policy.read_text()
    text = text.replace(
        "        recipe = playbook.match(request.instruction)",
        "        import sys\n"
        "        sys.stderr.write('TASKID=' + request.task_id + '\\n')\n"
        "        recipe = playbook.match(request.instruction)",
    )
    policy.write_text(text)
    return "look the answers up"


run_experiment(Path(sys.argv[1]), meta_agent=ScriptedMetaAgent([cheat]))
"""


@pytest.mark.bwrap
@pytest.mark.parametrize("policy", ["recursive", "pareto", "archive"])
def test_a_candidate_finds_no_answer_key_in_an_installed_package(tmp_path, policy):
    site = tmp_path / "site-packages"
    package = site / "metaeval"
    shutil.copytree(
        ROOT / "src" / "metaeval", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "examples", package / "_examples")
    bundled = package / "_examples" / "improve"
    manifest = json.loads((bundled / "manifest-scripted.json").read_text())
    manifest["sut"]["sut_config"] = str(bundled / "suts" / "scripted_sut.json")
    for split in ("optimize", "held_out"):
        config = manifest["evaluation"][split]["suite_config"]
        manifest["evaluation"][split]["suite_config"] = str(bundled / config)
    manifest["baseline"]["repo"] = str(tmp_path / "target")
    manifest["output"] = str(tmp_path / "bundle")
    manifest["trial_budget"] = 1
    manifest["search"] = {"policy": policy}  # the same sealing under every search policy
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    (tmp_path / "cheat.py").write_text(CHEAT)
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    init = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "improve", "init-target", "toolloop", "target"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert init.returncode == 0, init.stderr
    run = subprocess.run(
        [sys.executable, str(tmp_path / "driver.py"), str(path), str(tmp_path / "cheat.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    bundle = tmp_path / "bundle"
    logs = "".join(p.read_text(errors="replace") for p in sorted(bundle.rglob("*.log")))
    # the patch really ran in the target (it reported its task ids) ...
    ids = [line.split("=", 1)[1] for line in logs.splitlines() if line.startswith("TASKID=")]
    assert len(ids) == 15  # 10 optimize and 5 held-out episodes
    # ... was told no task name, and found no answer anywhere it could see
    names = {p.name for p in (package / "_examples" / "improve-suites" / "terminal").iterdir()}
    assert not any(name in task_id for task_id in ids for name in names)
    assert "FOUND-ANSWER" not in logs
    baseline = json.loads((bundle / "baseline_evaluation.json").read_text())
    (entry,) = [json.loads(x) for x in (bundle / "trial_ledger.jsonl").read_text().splitlines()]
    assert entry["failure_class"] is None  # a valid candidate inside the boundary
    assert entry["optimize_score"] == baseline["optimize"]["score"] == 0.0
    assert entry["held_out_score"] == baseline["held_out"]["score"] == 0.0
    assert entry["decision"] == "rejected"
