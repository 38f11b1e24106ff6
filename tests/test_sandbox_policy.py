"""The one sandbox policy against hostile code: planted secrets never reach a sandboxed process.

Marker files are planted in a temporary HOME (~/.netrc, ~/.ssh/id_test with a PEM key) and
in a directory outside every input; secret-looking variables are set in the host
environment. Workspace commands, Harbor task phases and improve's target servers then try to
read them all, and the tests assert that none of it comes back.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from metaeval.protocols.improve.pact import LaunchError, launch
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.protocols.improve.target_runtime import target_sandbox
from metaeval.sandbox import Workspace
from metaeval.sandbox.bwrap import bwrap_available
from metaeval.sandbox.policy import SANDBOX_UID, unprivileged_uid
from metaeval.tasks.harbor_root import run_harbor_phase

pytestmark = pytest.mark.skipif(
    not bwrap_available() and os.environ.get("METAEVAL_REQUIRE_BWRAP") != "1",
    reason="needs bubblewrap",
)

PEM_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQy"


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A fake HOME and an outside directory full of marker secrets; secret env variables."""
    marker = f"MARKER-{uuid.uuid4().hex}"
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text(f"machine example.com login u password {marker}-netrc\n")
    (home / ".ssh" / "id_test").write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        f"{PEM_BODY}\n{marker}-pem\n"
        "-----END OPENSSH PRIVATE KEY-----\n"
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text(f"{marker}-outside\n")
    monkeypatch.setenv("HOME", str(home))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "HF_TOKEN"):
        monkeypatch.setenv(name, f"{marker}-{name.lower()}")
    monkeypatch.setenv("METAEVAL_PLAIN_SETTING", f"{marker}-plain")
    return {"marker": marker, "home": home, "outside": outside}


def snoop_script(planted: dict) -> str:
    """A shell script that tries every way of reaching the planted secrets."""
    home, outside = planted["home"], planted["outside"]
    return f"""
    id -u
    env
    cat {home}/.netrc {home}/.ssh/id_test {outside}/notes.txt 2>&1
    cat ~/.netrc ~/.ssh/id_test 2>&1
    cat /etc/shadow /etc/gshadow 2>&1
    ls -la /root /home /etc/ssh /srv /work 2>&1
    grep -r {planted["marker"]} /etc /tmp 2>/dev/null
    echo done
    """


def assert_clean(text: str, planted: dict) -> None:
    assert planted["marker"] not in text
    assert PEM_BODY not in text
    assert not re.search(r"^root:[*!$]", text, re.MULTILINE)  # no shadow entry for root


def test_workspace_command_sees_no_host_secret(tmp_path: Path, planted: dict) -> None:
    ws = Workspace.create(tmp_path / "ws")
    result = ws.exec(snoop_script(planted), timeout_s=60)
    assert result.sandboxed and "done" in result.stdout
    assert_clean(result.stdout + result.stderr, planted)
    if unprivileged_uid():
        assert result.stdout.split()[0] == str(SANDBOX_UID)
    env_lines = dict(
        line.split("=", 1) for line in result.stdout.splitlines() if "=" in line and " " not in line
    )
    assert "METAEVAL_PLAIN_SETTING" not in env_lines  # not only secrets: nothing is inherited
    assert env_lines.get("HOME") == "/tmp"
    # metaeval's own checkout and venv are not visible to a workspace command either
    probe = ws.exec(f"test -e {sys.prefix} && echo venv-visible || echo venv-hidden")
    assert probe.stdout.strip() == "venv-hidden"


def test_workspace_declared_variable_is_the_only_way_in(tmp_path: Path, planted: dict) -> None:
    ws = Workspace.create(tmp_path / "ws")
    declared = ws.exec("echo $OPENAI_API_KEY", env={"OPENAI_API_KEY": "declared-value"})
    assert declared.stdout.strip() == "declared-value"
    silent = ws.exec("echo [$OPENAI_API_KEY]")
    assert silent.stdout.strip() == "[]"


def test_workspace_root_is_read_only_and_outside_writes_fail(tmp_path: Path) -> None:
    ws = Workspace.create(tmp_path / "ws")
    probe = f"probe-{uuid.uuid4().hex}"
    result = ws.exec(
        f"touch /{probe} /etc/{probe} /usr/{probe} 2>&1; echo ok > inside.txt; echo rc=$?"
    )
    assert "rc=0" in result.stdout
    assert (ws.path / "inside.txt").read_text() == "ok\n"
    for path in (f"/{probe}", f"/etc/{probe}", f"/usr/{probe}"):
        assert not os.path.exists(path)


def test_harbor_phase_sees_no_host_secret(tmp_path: Path, planted: dict) -> None:
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    work, logs = tmp_path / "work", tmp_path / "logs"
    work.mkdir()
    logs.mkdir()
    result = run_harbor_phase(task, work, logs, snoop_script(planted), 60, False)
    assert "done" in result.stdout, result.stderr
    assert_clean(result.stdout + result.stderr, planted)
    # metaeval's own environment (its venv, its checkout) is not part of a task's root
    probe = run_harbor_phase(
        task,
        work,
        logs,
        f"test -e {sys.prefix} && echo venv-visible || echo venv-hidden",
        30,
        False,
    )
    assert probe.stdout.strip() == "venv-hidden"


SNOOP_POLICY = """
import os, pathlib
print("ENV", dict(os.environ), flush=True)
for path in [os.environ.get("SNOOP_HOME", "") + "/.netrc",
             os.environ.get("SNOOP_HOME", "") + "/.ssh/id_test",
             os.environ.get("SNOOP_OUTSIDE", "") + "/notes.txt", "/etc/shadow"]:
    try:
        print("READ", path, pathlib.Path(path).read_text(), flush=True)
    except OSError as exc:
        print("DENIED", path, type(exc).__name__, flush=True)
print("KEY-BEGIN", flush=True)
print("-----BEGIN OPENSSH PRIVATE KEY-----", flush=True)
print("PEM_BODY", flush=True)
print("-----END OPENSSH PRIVATE KEY-----", flush=True)
try:
    pathlib.Path("planted-by-target.txt").write_text("x")
    print("WORKTREE-WRITABLE", flush=True)
except OSError:
    print("WORKTREE-READONLY", flush=True)
raise SystemExit(3)
"""


def test_improve_target_server_runs_sandboxed_with_redacted_log(
    tmp_path: Path, planted: dict
) -> None:
    """A target whose code dumps its environment and reads key files leaks nothing."""
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    (worktree / "snoop.py").write_text(SNOOP_POLICY.replace('"PEM_BODY"', repr(PEM_BODY)))
    profile = SystemProfile(
        name="snoop",
        command=["{python}", "snoop.py"],
        cwd=worktree,
        env={
            "SNOOP_HOME": str(planted["home"]),
            "SNOOP_OUTSIDE": str(planted["outside"]),
        },
        startup_timeout_s=30,
    )
    log_path = tmp_path / "logs" / "snoop.log"
    # The run's declared variable: the target's own key (a secret value it may use).
    declared = {"METAEVAL_TARGET_API_KEY": "sk-" + "d" * 40}
    with pytest.raises(LaunchError):
        launch(profile, log_path=log_path, extra_env=declared, sandbox=target_sandbox(worktree))
    log = log_path.read_text()
    assert "ENV {" in log  # it ran, under the running interpreter ({python})
    assert_clean(log, planted)
    assert "sk-" + "d" * 40 not in log and "[REDACTED]" in log
    assert "OPENAI_API_KEY" not in log.split("ENV", 1)[1]  # not inherited at all
    assert log.count("DENIED") == 4
    assert "WORKTREE-READONLY" in log and not (worktree / "planted-by-target.txt").exists()
    assert "sandboxed=True" in log


def test_python_placeholder_needs_no_python_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`{python}` is the running interpreter: a PATH without any python still launches."""
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    monkeypatch.setenv("PATH", str(bare_path))
    profile = SystemProfile(
        name="which-python",
        command=["{python}", "-c", "import sys; print('EXE', sys.executable); raise SystemExit(2)"],
        cwd=tmp_path,
        startup_timeout_s=20,
    )
    with pytest.raises(LaunchError, match="exited with code 2"):
        launch(profile, log_path=tmp_path / "p.log", sandbox=target_sandbox(tmp_path))
    assert f"EXE {sys.executable}" in (tmp_path / "p.log").read_text()


def test_example_profiles_do_not_depend_on_path_python() -> None:
    root = Path(__file__).resolve().parents[1] / "examples"
    profiles = sorted(root.rglob("profiles/*.json"))
    assert profiles
    for path in profiles:
        text = path.read_text()
        assert '"python"' not in text and '"python3"' not in text, path


def test_ci_path_has_no_python() -> None:
    """`.ci/run` runs the suite with a PATH on which no Python is found."""
    if os.environ.get("METAEVAL_ISOLATED_PATH") != "1":
        pytest.skip("only meaningful under .ci/run (METAEVAL_ISOLATED_PATH=1)")
    for name in ("python", "python3", "pip", "pip3"):
        assert shutil.which(name) is None, (name, shutil.which(name))
