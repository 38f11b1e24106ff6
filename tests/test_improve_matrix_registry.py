"""The 2 x 2 matrix with one suite in Podman whose image comes from a local registry
(`improve matrix --sandbox podman --pull missing`), and `improve run --pull never` refusing
to fetch it. A real registry process on 127.0.0.1 (Debian's `docker-registry`) and real
Podman, as in tests/test_audit_registry_pull.py (skipped without them unless
METAEVAL_REQUIRE_CONTAINER=1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from improve_experiment import experiment
from metaeval.sandbox.container import Engine
from metaeval.tasks.images import image_exists
from test_audit_registry_pull import BASE, engine, podman, registry  # noqa: F401
from test_improve_matrix import hand_row

TASK_TOML = (
    'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 120.0\n'
    '[environment]\nallow_internet = false\ndocker_image = "{image}"\n'
)
# the first task's verifier passes wherever it runs, the second needs the agent's file
TESTS = {
    "in-image": "echo 1",
    "needs-agent": "test -f /app/done.txt && echo 1 || echo 0",
}


def registry_suite(root: Path, image: str) -> Path:
    """A Harbor suite of two tasks naming `image` in task.toml; returns its suite config."""
    suite = root / "registry"
    for name, check in TESTS.items():
        task = suite / name
        (task / "tests").mkdir(parents=True)
        (task / "solution").mkdir()
        (task / "instruction.md").write_text(f"# {name}\n\nCreate /app/done.txt.\n")
        (task / "task.toml").write_text(TASK_TOML.replace("{image}", image))
        (task / "solution" / "solve.sh").write_text("#!/bin/bash\ntouch /app/done.txt\n")
        (task / "tests" / "test.sh").write_text(
            f"#!/bin/bash\nmkdir -p /logs/verifier\n{check} > /logs/verifier/reward.txt\n"
        )
    (suite / "suite.json").write_text(
        json.dumps({"name": "registry", "splits": {"optimize": list(TESTS)}})
    )
    config = root / "registry-optimize.json"
    config.write_text(
        json.dumps(
            {
                "name": "registry-optimize",
                "tasks_dir": "registry",
                "split_id": "optimize",
                "max_steps_per_task": 4,
                "task_timeout_s": 120,
                "command_timeout_s": 30,
            }
        )
    )
    return config


def improve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "improve", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_2x2_matrix_with_a_podman_suite_pulled_from_a_local_registry(
    engine: Engine,  # noqa: F811
    registry: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    image = f"{registry}/metaeval-test/improve-suite:1"
    pushed = podman(engine, "push", "--tls-verify=false", BASE, image)
    assert pushed.returncode == 0, pushed.stderr
    podman(engine, "rmi", image)
    assert not image_exists(engine, image)
    manifest = experiment(tmp_path)
    suites = tmp_path / "examples" / "improve-suites"
    registry_config = registry_suite(suites, image)
    config = manifest.parent / "matrix-scripted.yaml"
    data = yaml.safe_load(config.read_text())
    data["benchmarks"] = [
        {"id": "registry", "optimize": {"suite_config": str(registry_config)}},
        data["benchmarks"][1],  # the BFCL-style function-calling suite, in bubblewrap
    ]
    data["experiment"]["trial_budget"] = 1
    config.write_text(yaml.safe_dump(data))

    # --pull never (the default): nothing is fetched, the baseline cannot be evaluated
    planned = improve("matrix", str(config), "--plan")
    assert planned.returncode == 0, planned.stderr
    cell = tmp_path / "runs" / "improve-matrix" / "manifests" / "scripted-a--registry.json"
    never = improve(
        "run", str(cell), "--sandbox", "podman", "--pull", "never", "-o", str(tmp_path / "n")
    )
    assert never.returncode != 0
    assert image in never.stdout + never.stderr
    assert not image_exists(engine, image)

    done = improve("matrix", str(config), "--sandbox", "podman", "--pull", "missing")
    assert done.returncode == 0, done.stdout + done.stderr
    assert image_exists(engine, image)
    bundles = tmp_path / "runs" / "improve-matrix"
    rows = {r["cell"]: r for r in json.loads((bundles / "matrix_summary.json").read_text())}
    assert set(rows) == {
        "scripted-a--registry",
        "scripted-a--function-calling",
        "scripted-b--registry",
        "scripted-b--function-calling",
    }
    for name, row in rows.items():
        hand = hand_row(bundles / name)
        assert row["status"] == "finished" and row["trials"] == hand["trials"] == 1
        assert (row["baseline"], row["best"]) == (hand["baseline"], hand["best"])
        assert row["delta"] == hand["delta"]
        assert (row["promoted"], row["rejected"], row["invalid"]) == (
            hand["promoted"],
            hand["rejected"],
            hand["invalid"],
        )
        assert row["meta_agent_cost_usd"] == hand["meta_cost"]
        assert row["target_cost_usd"] == hand["target_cost"]
    # the registry tasks ran in the pulled image, the function-calling ones in bubblewrap;
    # the target has no model, so only the task that needs no agent passed
    baseline = json.loads(
        (bundles / "scripted-a--registry" / "baseline_evaluation.json").read_text()
    )
    statuses = {t["task_id"]: t["status"] for t in baseline["optimize"]["tasks"]}
    assert statuses == {"in-image": "passed", "needs-agent": "failed"}
    # the pulled tag names the image; what ran is the id it was resolved to once (issue 43)
    assert all(
        t["backend"].startswith("podman")
        and f"(image {image} (id {t['image_id']}))" in t["backend"]
        and t["image_id"]
        for t in baseline["optimize"]["tasks"]
    )
    calling = json.loads(
        (bundles / "scripted-a--function-calling" / "baseline_evaluation.json").read_text()
    )
    assert not any("podman" in t["backend"] for t in calling["optimize"]["tasks"])
    resolved = json.loads((bundles / "scripted-a--registry" / "resolved_manifest.json").read_text())
    assert resolved["pull"] == "missing" and resolved["sandbox"] == "podman"
