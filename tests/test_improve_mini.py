"""The mini-swe-agent target family: pinned source, PACT shim, harness-served model, full loop.

Everything here is real: the mini-swe-agent release installed from PyPI (the `mini` extra),
litellm talking HTTP, PACT servers as processes, git, bubblewrap, and for the last test
SmolLM2 behind llama-cpp-python's OpenAI-compatible server. The scripted model is a real
HTTP server on 127.0.0.1 speaking the Chat Completions format (tests/openai_stub.py).
Under `make test` (METAEVAL_REQUIRE_EXTRAS=1) a missing `mini` extra fails instead of skipping.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path

import pytest

from metaeval.errors import ConfigError, MetaevalError
from metaeval.protocols.improve import init_target as init_module
from metaeval.protocols.improve.config import TargetModelSettings
from metaeval.protocols.improve.episode_limits import EpisodeLimits
from metaeval.protocols.improve.init_target import MINI_VERSION, init_target
from metaeval.protocols.improve.meta_agents import ScriptedMetaAgent
from metaeval.protocols.improve.node_eval import SRC_DIR
from metaeval.protocols.improve.pact.launcher import LaunchError, launch
from metaeval.protocols.improve.pact.protocol import ActRequest, Observation, ResetRequest
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.protocols.improve.resolve import resolve_manifest
from metaeval.protocols.improve.run import run_experiment
from metaeval.protocols.improve.suite_eval import evaluate_suite
from metaeval.protocols.improve.target_model import TargetModelService, served_alias
from metaeval.protocols.improve.target_runtime import target_sandbox

sys.path.insert(0, str(Path(__file__).parent))
from openai_stub import OpenAIStub  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "improve"
PROFILE = EXAMPLES / "profiles" / "mini_swe_agent_target.json"
SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

if importlib.util.find_spec("minisweagent") is None:
    if os.environ.get("METAEVAL_REQUIRE_EXTRAS") == "1":
        raise RuntimeError(
            "the `mini` extra (mini-swe-agent) is required: pip install -e '.[mini]'"
        )
    pytest.skip("mini-swe-agent is not installed (extra `mini`)", allow_module_level=True)


@pytest.fixture(scope="module")
def mini_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("mini") / "target"
    init_target("mini-swe-agent", repo)
    return repo


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def fenced(command: str, fence: str = "mswea_bash_command") -> str:
    return f"THOUGHT: next step.\n\n```{fence}\n{command}\n```"


def profile_for(repo: Path) -> SystemProfile:
    return SystemProfile.model_validate_json(PROFILE.read_text()).model_copy(update={"cwd": repo})


def launch_target(repo: Path, stub: OpenAIStub, log: Path):
    env = {
        "METAEVAL_TARGET_MODEL": "openai/stub",
        "METAEVAL_TARGET_BASE_URL": stub.base_url,
        "METAEVAL_TARGET_API_KEY": "sk-test",
        "PYTHONPATH": f"{repo}:{SRC_DIR}",
    }
    return launch(profile_for(repo), log_path=log, extra_env=env)


def patch_action_fence(repo: Path) -> str:
    """The candidate edit used below: also accept ```bash fences (a one-line regex change)."""
    path = repo / "minisweagent" / "models" / "litellm_textbased_model.py"
    text = path.read_text()
    old = 'action_regex: str = r"```mswea_bash_command\\s*\\n(.*?)\\n```"'
    assert old in text, "the pinned release changed; update this test's patch"
    path.write_text(
        text.replace(old, old.replace("mswea_bash_command", "(?:mswea_bash_command|bash)"))
    )
    return "accept ```bash fences as actions"


# --- init-target ------------------------------------------------------------------------------


def test_init_target_copies_the_pinned_release_verbatim(mini_repo: Path):
    dist = metadata.distribution("mini-swe-agent")
    expected = {
        f.as_posix()
        for f in dist.files
        if f.parts[0] == "minisweagent" and "__pycache__" not in f.parts
    }
    copied = {
        p.relative_to(mini_repo).as_posix()
        for p in (mini_repo / "minisweagent").rglob("*")
        if p.is_file()
    }
    assert copied == expected and len(expected) > 50
    for entry in dist.files:
        if entry.as_posix() in ("minisweagent/agents/default.py", "minisweagent/__init__.py"):
            assert (mini_repo / entry.as_posix()).read_bytes() == Path(entry.locate()).read_bytes()
    provenance = json.loads((mini_repo / "target.json").read_text())
    assert provenance["version"] == MINI_VERSION == dist.version
    assert provenance["files"] == len(expected)
    assert provenance["mutable_root"] == "minisweagent"
    tracked = set(git(mini_repo, "ls-files").split())
    assert {"mini_pact.py", "target.json", "README.md", ".gitignore"} <= tracked
    assert expected <= tracked
    assert git(mini_repo, "status", "--porcelain") == ""
    assert f"mini-swe-agent {MINI_VERSION}" in git(mini_repo, "log", "-1", "--format=%s")


def fake_distribution(root: Path, version: str, tamper: bool) -> metadata.Distribution:
    """A real on-disk distribution (dist-info with METADATA and RECORD) holding one module."""
    package = root / "minisweagent"
    package.mkdir(parents=True)
    body = b'__version__ = "x"\n'
    (package / "__init__.py").write_bytes(body)
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
    info = root / f"mini_swe_agent-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: mini-swe-agent\nVersion: {version}\n"
    )
    (info / "RECORD").write_text(
        f"minisweagent/__init__.py,sha256={digest},{len(body)}\n"
        f"mini_swe_agent-{version}.dist-info/RECORD,,\n"
    )
    if tamper:
        (package / "__init__.py").write_bytes(body + b"EDITED = True\n")
    return metadata.Distribution.at(info)


@pytest.mark.parametrize(
    ("version", "tamper", "message"),
    [
        (MINI_VERSION, True, "differs from the wheel RECORD"),
        ("2.0.0", False, f"pins {MINI_VERSION}"),
    ],
)
def test_init_target_refuses_an_edited_or_unpinned_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, tamper: bool, message: str
):
    dist = fake_distribution(tmp_path / "site", version, tamper)
    monkeypatch.setattr(init_module.metadata, "distribution", lambda name: dist)
    dest = tmp_path / "out" / "target"
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        init_target("mini-swe-agent", dest)
    if tamper:
        assert "minisweagent/__init__.py" in str(info.value)
    # Nothing half-built is left behind.
    assert not dest.exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_cli_init_target(tmp_path: Path):
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "metaeval.cli",
            "improve",
            "init-target",
            "mini-swe-agent",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    head = git(tmp_path / "t", "rev-parse", "HEAD").strip()
    assert head in ok.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "metaeval.cli",
            "improve",
            "init-target",
            "swe-agent",
            str(tmp_path / "u"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "unknown target family" in bad.stderr + bad.stdout
    assert not (tmp_path / "u").exists()


# --- the shim over PACT -----------------------------------------------------------------------


def test_shim_runs_an_episode_through_minis_own_loop(mini_repo: Path, tmp_path: Path):
    def reply(messages):
        turns = sum(1 for m in messages if m["role"] == "assistant")
        return fenced("ls -la") if turns == 0 else fenced(f"echo {SENTINEL}")

    with OpenAIStub(reply) as stub:
        server = launch_target(mini_repo, stub, tmp_path / "server.log")
        try:
            client = server.client(timeout_s=60)
            described = client.describe()
            assert described.name == "mini-swe-agent" and described.version == MINI_VERSION
            assert described.info["model"] == "openai/stub"
            assert described.info["source"] == str(mini_repo)
            client.reset(ResetRequest(episode_id="e1", task_id="t", instruction="List files."))
            first = client.act(ActRequest(episode_id="e1", observation=Observation(kind="initial")))
            assert first.action.type == "command" and first.action.command == "ls -la"
            listing = Observation(
                kind="command_result", step=1, stdout="a.txt\nb.txt\n", exit_code=0
            )
            second = client.act(ActRequest(episode_id="e1", observation=listing))
            assert second.action.command == f"echo {SENTINEL}"
            done = Observation(kind="command_result", step=2, stdout=f"{SENTINEL}\n", exit_code=0)
            third = client.act(ActRequest(episode_id="e1", observation=done))
            assert third.action.type == "submit"
        finally:
            server.stop()
    requests = stub.chat_requests()
    assert len(requests) == 2
    # mini's system prompt and task template, then its observation template with our output.
    system, user = requests[0]["messages"][:2]
    assert "mswea_bash_command" in system["content"] and "List files." in user["content"]
    observation = requests[1]["messages"][-1]["content"]
    assert "<returncode>0</returncode>" in observation and "a.txt\nb.txt" in observation
    # Token usage is passed through from the endpoint's replies.
    assert first.usage["input_tokens"] == sum(
        len(str(m["content"]).split()) for m in requests[0]["messages"]
    )
    assert first.usage["output_tokens"] == len(fenced("ls -la").split())


def test_a_patch_to_the_worktree_changes_the_agent(mini_repo: Path, tmp_path: Path):
    """The same model replies (```bash fences) fail on the baseline and act on the candidate."""
    candidate = tmp_path / "candidate"
    git(tmp_path, "clone", "-q", str(mini_repo), str(candidate))
    patch_action_fence(candidate)

    def reply(messages):
        return fenced("echo hi", fence="bash")

    def first_action(repo: Path, name: str):
        with OpenAIStub(reply) as stub:
            server = launch_target(repo, stub, tmp_path / f"{name}.log")
            try:
                client = server.client(timeout_s=60)
                client.reset(ResetRequest(episode_id=name, task_id="t", instruction="Say hi."))
                initial = Observation(kind="initial")
                return client.act(ActRequest(episode_id=name, observation=initial)), stub
            finally:
                server.stop()

    baseline, base_stub = first_action(mini_repo, "baseline")
    assert baseline.action.type == "submit"  # three format errors in a row end mini's run
    requests = base_stub.chat_requests()
    assert len(requests) == 3
    assert "Format error" in requests[-1]["messages"][-1]["content"]
    patched, patched_stub = first_action(candidate, "candidate")
    assert patched.action.type == "command" and patched.action.command == "echo hi"
    assert len(patched_stub.chat_requests()) == 1


def test_shim_refuses_a_minisweagent_from_outside_the_repository(tmp_path: Path, mini_repo: Path):
    bare = tmp_path / "no-source"
    bare.mkdir()
    shutil.copy(mini_repo / "mini_pact.py", bare / "mini_pact.py")
    with OpenAIStub(lambda m: fenced("true")) as stub, pytest.raises(LaunchError) as info:
        launch_target(bare, stub, tmp_path / "server.log")
    assert "not from this repository" in info.value.log_tail


def test_shim_maps_model_settings_to_litellm(mini_repo: Path):
    cases = [
        {"METAEVAL_TARGET_MODEL": "local/smollm2", "METAEVAL_TARGET_BASE_URL": "http://h/v1"},
        {"METAEVAL_TARGET_MODEL": "local/models/q.gguf", "METAEVAL_TARGET_BASE_URL": "http://h/v1"},
        {
            "METAEVAL_TARGET_MODEL": "openai/Qwen/Qwen2.5-Coder",
            "METAEVAL_TARGET_BASE_URL": "http://h/v1",
        },
        {"METAEVAL_TARGET_MODEL": "anthropic/claude-x", "METAEVAL_TARGET_MAX_TOKENS": "64"},
        {
            "METAEVAL_TARGET_MODEL": "litellm/gemini/gemini-pro",
            "METAEVAL_TARGET_TEMPERATURE": "0.0",
        },
    ]
    code = (
        "import json, sys, mini_pact\n"
        "print(json.dumps([mini_pact.litellm_settings(c) for c in json.loads(sys.argv[1])]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(cases)],
        cwd=mini_repo,
        env={**os.environ, "PYTHONPATH": f"{mini_repo}:{SRC_DIR}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    names = [(name, kwargs) for name, kwargs in json.loads(out.stdout.splitlines()[-1])]
    assert names[0] == ("openai/smollm2", {"api_base": "http://h/v1", "api_key": "sk-no-key"})
    assert names[1][0] == "openai/q"
    assert names[2][0] == "openai/Qwen/Qwen2.5-Coder"
    assert names[3] == ("anthropic/claude-x", {"max_tokens": 64})
    assert names[4] == ("gemini/gemini-pro", {"temperature": 0.0})


# --- the target model service -----------------------------------------------------------------


def test_target_model_env_per_api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """No key ever reaches a target: a hosted model or a keyed endpoint is behind the
    harness's gateway, on the loopback port its sandbox joins to the gateway's socket."""
    own = TargetModelService(TargetModelSettings(model="local/smollm2"), "metaeval", tmp_path)
    assert own.env() == {"METAEVAL_TARGET_MODEL": "local/smollm2"} and not own.needs_server()
    assert own.services() == ()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-" + "k" * 24)
    hosted = TargetModelService(
        TargetModelSettings(model="openai/gpt-4o", max_tokens=100), "openai", tmp_path
    )
    try:
        env = hosted.env()
        token = env.pop("METAEVAL_TARGET_API_KEY")  # the gateway socket's own token
        assert token.startswith("mgw-") and "k" * 24 not in token
        assert env == {
            "METAEVAL_TARGET_MODEL": "openai/gpt-4o",
            "METAEVAL_TARGET_MAX_TOKENS": "100",
            "METAEVAL_TARGET_BASE_URL": "http://127.0.0.1:8787/v1",
        }
        [(port, socket_path)] = hosted.services()
        assert port == 8787 and Path(socket_path).is_socket()
    finally:
        hosted.stop()
    assert not Path(socket_path).exists()
    for model, prefix, url in [
        ("openai/gpt-4o", "OPENAI", "http://127.0.0.1:8787/v1"),
        ("anthropic/claude-x", "ANTHROPIC", "http://127.0.0.1:8787"),
    ]:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-planted-" + "a" * 24)
        own_hosted = TargetModelService(TargetModelSettings(model=model), "metaeval", tmp_path)
        try:
            env = own_hosted.env()
            assert env[f"{prefix}_API_KEY"].startswith("mgw-")  # never the planted key
            assert env == {
                "METAEVAL_TARGET_MODEL": model,
                f"{prefix}_BASE_URL": url,
                f"{prefix}_API_KEY": env[f"{prefix}_API_KEY"],
            }
        finally:
            own_hosted.stop()
    remote = TargetModelSettings(
        model="openai/qwen", base_url="http://127.0.0.1:9/v1", api_key_env="METAEVAL_TEST_KEY"
    )
    monkeypatch.delenv("METAEVAL_TEST_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        TargetModelService(remote, "openai", tmp_path).env()
    assert info.value.field == "sum.api_key_env"
    monkeypatch.setenv("METAEVAL_TEST_KEY", "sk-secret")
    service = TargetModelService(remote, "openai", tmp_path)
    env = service.env()
    service.stop()
    assert env["METAEVAL_TARGET_BASE_URL"] == "http://127.0.0.1:8787/v1"
    assert env["METAEVAL_TARGET_API_KEY"].startswith("mgw-")
    # Nothing listens on port 9: the harness sees the endpoint as down.
    assert TargetModelService(remote, "openai", tmp_path).endpoint_down(timeout_s=2)
    with pytest.raises(ConfigError, match="GGUF model file not found"):
        TargetModelService(
            TargetModelSettings(model=f"local/{tmp_path}/missing.gguf"), "openai", tmp_path
        ).env()
    assert served_alias("local/smollm2") == "smollm2"
    assert served_alias("local/m/q4.gguf") == "q4"


def test_manifest_sum_is_validated_with_the_field_named(tmp_path: Path):
    configs = tmp_path / "examples" / "improve"
    shutil.copytree(EXAMPLES, configs)
    manifest = json.loads((configs / "manifest-scripted.json").read_text())
    init_target("toolloop", tmp_path / "runs" / "improve-target")
    path = configs / "bad.json"
    for bad, field in [({"base_url": "ftp://x"}, "sum.base_url"), ({"n_ctx": 100}, "sum.n_ctx")]:
        manifest["sum"] = {"model": "local/smollm2", **bad}
        path.write_text(json.dumps(manifest))
        with pytest.raises(ConfigError) as info:
            resolve_manifest(path)
        assert "bad.json" in str(info.value) and f"field '{field}'" in str(info.value)
    manifest["sum"] = {"model": "none", "tempreature": 0}
    path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="sum.tempreature"):
        resolve_manifest(path)


# --- the trial loop with the mini target ------------------------------------------------------

TASKS = {
    "write-greeting": (
        "Create the file /app/greeting.txt containing exactly the word hello.",
        "echo hello > /app/greeting.txt",
        'test "$(cat /app/greeting.txt)" = hello',
    ),
    "count-lines": (
        "Write the number of lines of /app/data.txt to /app/count.txt.",
        "wc -l < /app/data.txt > /app/count.txt",
        'test "$(tr -d " " < /app/count.txt)" = 3',
    ),
}


def write_suite(root: Path) -> Path:
    """Two small Harbor tasks (optimize split) and the suite config that selects them."""
    suite = root / "suite"
    for task_id, (instruction, _solution, check) in TASKS.items():
        task = suite / task_id
        (task / "environment").mkdir(parents=True)
        (task / "tests").mkdir()
        (task / "task.toml").write_text('version = "1.0"\n\n[verifier]\ntimeout_sec = 30.0\n')
        (task / "instruction.md").write_text(instruction + "\n")
        if task_id == "count-lines":
            (task / "environment" / "data.txt").write_text("a\nb\nc\n")
        (task / "tests" / "test.sh").write_text(
            "#!/bin/bash\nmkdir -p /logs/verifier\n"
            f"if {check}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
        )
    (suite / "suite.json").write_text(
        json.dumps({"name": "mini-test", "splits": {"optimize": list(TASKS)}})
    )
    config = root / "suite_optimize.json"
    config.write_text(
        json.dumps(
            {
                "name": "mini-test-optimize",
                "tasks_dir": "suite",
                "split_id": "optimize",
                "max_steps_per_task": 4,
                "task_timeout_s": 90,
                "command_timeout_s": 20,
            }
        )
    )
    return config


def solver(messages) -> str:
    """A model that knows the answers but writes ```bash fences, which mini 2.4.6 rejects."""
    task = next(m["content"] for m in messages if m["role"] == "user")
    done = any(
        m["role"] == "user" and "<returncode>0</returncode>" in str(m["content"]) for m in messages
    )
    if done:
        return fenced(f"echo {SENTINEL}", fence="bash")
    for instruction, solution, _check in TASKS.values():
        if instruction in task:
            return fenced(solution, fence="bash")
    return fenced("true", fence="bash")


def mini_experiment(
    tmp_path: Path, mini_repo: Path, sum_settings: dict, max_steps: int = 4, timeout_s: float = 90
) -> Path:
    """A budget-1 experiment on a clone of the mini target and the two-task suite: manifest."""
    git(tmp_path, "clone", "-q", str(mini_repo), str(tmp_path / "target"))
    suite_config = write_suite(tmp_path)
    shutil.copy(PROFILE, tmp_path / "profile.json")
    sut = {
        "name": "scripted",
        "contract": "edit/1",
        "meta_agent": {"agent": "scripted"},
        "sum_profile": "profile.json",
    }
    (tmp_path / "sut.json").write_text(json.dumps(sut))
    manifest = {
        "mode": "recursive_search",
        "sut": {"sut_config": "sut.json"},
        "sum": sum_settings,
        "baseline": {"id": "baseline", "repo": "target", "base_commit": "HEAD"},
        "evaluation": {"optimize": {"suite_config": suite_config.name}},
        "trial_budget": 1,
        "target_budget": {"max_steps_per_task": max_steps, "task_timeout_s": timeout_s},
        "output": "bundle",
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


@pytest.mark.bwrap
def test_improve_loop_promotes_a_mini_patch(tmp_path: Path, mini_repo: Path):
    with OpenAIStub(solver) as stub:
        settings = {"model": "openai/stub", "base_url": stub.base_url, "temperature": 0.0}
        manifest = mini_experiment(tmp_path, mini_repo, settings)
        agent = ScriptedMetaAgent([lambda worktree, _input: patch_action_fence(worktree)])
        summary = run_experiment(manifest, meta_agent=agent)
    bundle = tmp_path / "bundle"
    baseline = json.loads((bundle / "baseline_evaluation.json").read_text())
    assert baseline["optimize"]["score"] == 0.0 and baseline["optimize"]["failed"] == 2
    (entry,) = [
        json.loads(line) for line in (bundle / "trial_ledger.jsonl").read_text().splitlines()
    ]
    assert entry["decision"] == "promoted" and entry["failure_class"] is None
    assert entry["optimize_score"] == 1.0
    patch = (bundle / "trials" / "001" / "candidate.patch").read_text()
    assert "+++ b/minisweagent/models/litellm_textbased_model.py" in patch
    assert patch.count("+++ ") == 1
    assert summary.promotions == 1
    # The model was reached through the manifest's endpoint, with the manifest's sampling.
    assert stub.chat_requests() and all(r.get("temperature") == 0.0 for r in stub.chat_requests())


def test_baseline_is_a_framework_failure_when_the_model_server_cannot_start(
    tmp_path: Path, mini_repo: Path
):
    settings = {"model": f"local/{tmp_path}/absent.gguf"}
    manifest = mini_experiment(tmp_path, mini_repo, settings, max_steps=2, timeout_s=30)
    with pytest.raises(MetaevalError, match=r"framework_failure.*target model.*absent\.gguf"):
        run_experiment(manifest, meta_agent=ScriptedMetaAgent([]))
    # Not recorded as the baseline's result: a resume tries again.
    assert not (tmp_path / "bundle" / "baseline_evaluation.json").exists()


@pytest.mark.bwrap
def test_a_model_endpoint_that_dies_mid_evaluation_is_a_framework_failure(
    tmp_path: Path, mini_repo: Path
):
    """The candidate fails because the benchmark's model went away: not the candidate's fault."""
    holder: dict[str, OpenAIStub] = {}

    def dying(messages):
        threading.Timer(0.2, holder["stub"].close).start()  # answer, then go away
        return fenced("ls")

    with OpenAIStub(dying) as stub:
        holder["stub"] = stub
        settings = {"model": "openai/stub", "base_url": stub.base_url}
        manifest = mini_experiment(tmp_path, mini_repo, settings, max_steps=3, timeout_s=60)
        with pytest.raises(MetaevalError, match="framework_failure.*model endpoint stopped"):
            run_experiment(manifest, meta_agent=ScriptedMetaAgent([]))
    assert stub.chat_requests()  # it did answer before it went away
    assert not (tmp_path / "bundle" / "baseline_evaluation.json").exists()


# --- the real local model ---------------------------------------------------------------------


@pytest.mark.bwrap
@pytest.mark.server
def test_smollm2_served_by_the_harness_drives_mini(tmp_path: Path, mini_repo: Path):
    """The default target model, served over llama-cpp-python's OpenAI-compatible server."""
    settings = TargetModelSettings(model="local/smollm2", temperature=0.0, max_tokens=128)
    service = TargetModelService(settings, "openai", tmp_path / "model")
    env = service.env()
    assert env["METAEVAL_TARGET_BASE_URL"] == "http://127.0.0.1:8787/v1"
    assert not service.endpoint_down()
    env["PYTHONPATH"] = f"{mini_repo}:{SRC_DIR}"
    # In its network-less sandbox, reaching the harness's server through the model socket.
    sandbox = target_sandbox(mini_repo, services=service.services())
    server = launch(
        profile_for(mini_repo), log_path=tmp_path / "mini.log", extra_env=env, sandbox=sandbox
    )
    try:
        suite = write_suite(tmp_path).parent / "suite"
        result = evaluate_suite(
            [suite / "write-greeting"],
            lambda: server.client(timeout_s=240),
            concurrency=1,
            limits=EpisodeLimits(max_steps=2, task_timeout_s=240, command_timeout_s=20),
            work_root=tmp_path / "work",
        )
    finally:
        server.stop()
    (outcome,) = result.outcomes
    assert outcome.status in ("passed", "failed"), outcome.reason
    assert outcome.steps >= 1
    # Real tokens from llama.cpp: mini's system and task prompts alone are well over 500.
    assert outcome.usage["input_tokens"] > 500 and outcome.usage["output_tokens"] > 0
    model_server = service._server
    assert model_server is not None
    model_server.process.kill()
    model_server.process.wait(timeout=10)
    assert service.endpoint_down()
    service.stop()
    assert "target-model-server" in (tmp_path / "model" / "target-model-server.log").read_text()
