"""Real processes: isolation under bubblewrap, timeouts and tree kills, limits, env scrubbing.

Tests marked `bwrap` skip only when bubblewrap cannot run here; with METAEVAL_REQUIRE_BWRAP=1
they fail instead, so CI cannot skip them silently.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaeval.sandbox import Workspace, build_bwrap_argv, bwrap_available, run_process
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.sandbox import process as process_mod
from metaeval.sandbox.policy import network_isolation

REQUIRE_ENV = "METAEVAL_REQUIRE_BWRAP"
PY = os.path.realpath(sys.executable)  # the base interpreter: the sandbox shows no venv


def _require_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    if not bwrap_available():
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but bubblewrap cannot run on this machine")
        pytest.skip("bubblewrap (bwrap) is not usable on this machine")


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run commands through bwrap (skip, or fail under METAEVAL_REQUIRE_BWRAP=1, if absent)."""
    _require_bwrap(monkeypatch)


@pytest.fixture
def fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force the plain-subprocess fallback."""
    monkeypatch.setenv(bwrap_mod.FORCE_FALLBACK_ENV, "1")
    monkeypatch.setattr(bwrap_mod, "_warned", True)  # keep test output quiet


@pytest.fixture(params=[pytest.param("bwrap", marks=pytest.mark.bwrap), "fallback"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both execution paths: through bubblewrap, and the plain fallback."""
    if request.param == "bwrap":
        _require_bwrap(monkeypatch)
    else:
        monkeypatch.setenv(bwrap_mod.FORCE_FALLBACK_ENV, "1")
        monkeypatch.setattr(bwrap_mod, "_warned", True)
    return request.param


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace.create(tmp_path / "ws")


@pytest.fixture
def ro_ws(tmp_path: Path) -> Workspace:
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("print('hello from clone')\n")
    return Workspace.read_only_clone(src, tmp_path / "clone")


def _processes_with(token: str) -> list[int]:
    """Host pids whose command line contains `token` (sandboxed ones are visible too)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if token.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _wait_gone(token: str, within_s: float = 3.0) -> list[int]:
    end = time.monotonic() + within_s
    while (alive := _processes_with(token)) and time.monotonic() < end:
        time.sleep(0.05)
    return alive


@pytest.fixture
def tcp_server() -> Iterator[tuple[int, list[int]]]:
    """A real TCP server on 127.0.0.1 in this process; yields (port, connection counter)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    accepted = [0]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            accepted[0] += 1
            with conn:
                conn.sendall(b"pong")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(timeout=2)
    server.close()


# ---------------------------------------------------------------- availability and argv


def test_bwrap_required_in_ci() -> None:
    """CI sets METAEVAL_REQUIRE_BWRAP=1 so the bwrap tests below cannot silently skip."""
    if os.environ.get(REQUIRE_ENV) != "1":
        pytest.skip(f"{REQUIRE_ENV} is not set")
    assert bwrap_available(), "bubblewrap must be installed and usable here"


def test_build_bwrap_argv_shape(tmp_path: Path) -> None:
    argv = build_bwrap_argv(tmp_path, writable=False, network=False)
    ws = str(tmp_path.resolve())
    assert argv[-1] == "--" and argv[argv.index("--chdir") + 1] == ws
    assert "--unshare-all" in argv and "--unshare-pid" in argv and "--share-net" not in argv
    assert "--die-with-parent" in argv and "--new-session" in argv and "--as-pid-1" not in argv
    joined = " ".join(argv)
    # the root is assembled from the policy's allowlist, never the host root
    assert "--ro-bind / /" not in joined and f"--ro-bind {ws} {ws}" in joined
    assert "--ro-bind /usr /usr" in joined and "--remount-ro /" in joined
    assert "/etc/shadow" not in joined and "--ro-bind /etc /etc" not in joined
    assert " /root " not in f" {joined} " and " /home " not in f" {joined} "
    assert "--tmpfs /tmp" in joined and "--proc /proc" in joined and "--dev /dev" in joined
    assert joined.index("--tmpfs /tmp") < joined.index(f"--ro-bind {ws}")
    writable = build_bwrap_argv(tmp_path, writable=True, network=True, extra_ro_binds=["/opt"])
    assert f"--bind {ws} {ws}" in " ".join(writable)
    assert ("--share-net" in writable) == (network_isolation() == "host")
    assert "--ro-bind /opt /opt" in " ".join(writable)


def test_fallback_warns_once(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    monkeypatch.setattr(bwrap_mod, "bwrap_binary", lambda: None)
    monkeypatch.setattr(bwrap_mod, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="metaeval.sandbox"):
        assert bwrap_mod.use_bwrap() is False
        assert bwrap_mod.use_bwrap() is False
    messages = [r.getMessage() for r in caplog.records if r.name == "metaeval.sandbox"]
    assert messages == [bwrap_mod.NOT_FOUND_WARNING]
    assert "\n" not in messages[0]


# ---------------------------------------------------------------- filesystem isolation


@pytest.mark.bwrap
def test_read_only_clone_cannot_be_written(sandboxed: None, ro_ws: Workspace) -> None:
    result = ro_ws.exec("echo x > f.txt")
    assert result.sandboxed and result.returncode not in (0, None)
    assert not (ro_ws.path / "f.txt").exists()
    assert "Read-only file system" in result.stderr
    run = ro_ws.exec([PY, "main.py"])
    assert run.ok and run.stdout == "hello from clone\n"


@pytest.mark.bwrap
def test_writes_outside_workspace_fail(sandboxed: None, ws: Workspace) -> None:
    token = uuid.uuid4().hex
    inside = ws.exec("echo hi > inside.txt && mkdir -p d && echo deep > d/f.txt")
    assert inside.ok and (ws.path / "inside.txt").read_text() == "hi\n"
    assert (ws.path / "d" / "f.txt").read_text() == "deep\n"
    for target in (f"/etc/metaeval_probe_{token}", f"/root/metaeval_probe_{token}"):
        result = ws.exec(f"echo x > {target}")
        assert result.returncode not in (0, None), target
        assert not os.path.exists(target)
    # /tmp inside is a private tmpfs: writes succeed there but never reach the host.
    private = ws.exec(f"echo x > /tmp/metaeval_probe_{token} && cat /tmp/metaeval_probe_{token}")
    assert private.ok and private.stdout == "x\n"
    assert not os.path.exists(f"/tmp/metaeval_probe_{token}")


@pytest.mark.bwrap
def test_network_is_unreachable_unless_enabled(
    sandboxed: None, ws: Workspace, tcp_server: tuple[int, list[int]]
) -> None:
    port, accepted = tcp_server
    probe = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        "print(s.recv(4).decode())\n"
    )
    blocked = ws.exec([PY, "-c", probe], timeout_s=20)
    assert blocked.sandboxed and blocked.returncode not in (0, None)
    assert "pong" not in blocked.stdout and accepted[0] == 0
    allowed = ws.exec([PY, "-c", probe], network=True, timeout_s=20)
    if network_isolation() == "own":  # a network of its own: still not the host's loopback
        assert allowed.returncode not in (0, None) and "ConnectionRefused" in allowed.stderr
        assert accepted[0] == 0
        return
    assert allowed.ok, allowed.stderr  # the host's network, shared
    assert allowed.stdout.strip() == "pong" and accepted[0] == 1


# ---------------------------------------------------------------- timeouts and tree kills


def test_timeout_kills_grandchildren(mode: str, ws: Workspace) -> None:
    token = f"metaeval-{uuid.uuid4().hex}"
    # bash -> sh -> background loop (grandchild) writing a marker every 0.2 s.
    inner = "(while :; do date +%s%N > marker; sleep 0.2; done) & sleep 300"
    command = f"sh -c '{inner}' {token}; sleep 300"
    timeout = 2.0
    result = ws.exec(command, timeout_s=timeout)
    assert result.sandboxed is (mode == "bwrap")
    assert result.timed_out and result.returncode is None
    assert timeout <= result.duration_s < timeout + 5
    marker = ws.path / "marker"
    assert marker.exists(), "the grandchild never ran"
    assert _wait_gone(token) == [], "a process of the command survived the timeout"
    before = marker.read_text()
    time.sleep(0.7)
    assert marker.read_text() == before, "the grandchild is still writing"


def test_background_children_do_not_outlive_exec(mode: str, ws: Workspace) -> None:
    token = f"metaeval-{uuid.uuid4().hex}"
    start = time.monotonic()
    result = ws.exec(f"(sleep 30; echo {token}) & echo started", timeout_s=20)
    assert result.ok and result.stdout == "started\n"
    assert time.monotonic() - start < 25  # not the background child's 30 s
    assert _wait_gone(token) == []


def test_closed_stdout_still_times_out(mode: str, ws: Workspace) -> None:
    result = ws.exec("exec >&- 2>&-; sleep 30", timeout_s=1)
    assert result.timed_out and result.duration_s < 25  # the sleep would take 30


def test_escaped_session_cannot_hang_the_caller(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A setsid'd grandchild holding our pipes: the call still returns within bounds."""
    monkeypatch.setattr(process_mod, "EXIT_DRAIN_S", 0.2)
    monkeypatch.setattr(process_mod, "KILL_REAP_S", 0.5)
    token = f"metaeval-{uuid.uuid4().hex}"
    try:
        start = time.monotonic()
        result = run_process(
            ["bash", "-c", f"setsid sh -c 'sleep 30; echo {token}' & echo main"],
            cwd=tmp_path,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            timeout_s=25,
        )
        assert time.monotonic() - start < 20  # neither the grandchild's 30 s nor the timeout
        assert result.returncode == 0 and result.stdout.startswith("main")
    finally:
        for pid in _processes_with(token):
            os.kill(pid, 9)


# ---------------------------------------------------------------- limits and environment


def test_memory_limit(mode: str, ws: Workspace) -> None:
    grab = "x = bytearray(1 << 30); print('allocated')"
    limited = ws.exec([PY, "-c", grab], memory_mb=256)
    assert limited.returncode not in (0, None)
    assert "allocated" not in limited.stdout and "MemoryError" in limited.stderr
    small = ws.exec([PY, "-c", "x = bytearray(1 << 20); print('ok')"], memory_mb=256)
    assert small.ok and small.stdout == "ok\n"


def test_secrets_are_not_forwarded(
    mode: str, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOO_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("GH_TOKEN", "gh-parent-token")
    monkeypatch.setenv("my_secret_thing", "hush")
    result = ws.exec("env")
    assert result.ok
    for leaked in ("sk-parent-secret", "gh-parent-token", "hush", "FOO_API_KEY"):
        assert leaked not in result.stdout
    assert "HOME=/tmp" in result.stdout.splitlines()
    explicit = ws.exec("echo $FOO_API_KEY $EXTRA", env={"FOO_API_KEY": "given", "EXTRA": "e"})
    assert explicit.stdout == "given e\n"


def test_output_cap_records_raw_sizes(mode: str, ws: Workspace) -> None:
    script = (
        "import sys\n"
        "sys.stdout.write('HEAD' + 'a' * 100000 + 'TAIL')\n"
        "sys.stderr.write('e' * 5000)\n"
    )
    result = ws.exec([PY, "-c", script], max_output_bytes=1000)
    assert result.ok
    assert result.stdout_bytes == 100008 and result.stderr_bytes == 5000
    assert result.stdout_truncated and result.stderr_truncated
    assert result.stdout.startswith("HEAD") and result.stdout.endswith("TAIL")
    assert "99008 bytes omitted" in result.stdout and len(result.stdout) < 1100
    small = ws.exec("printf abc")
    assert small.stdout == "abc" and small.stdout_bytes == 3 and not small.stdout_truncated


def test_stdin_and_exit_codes(mode: str, ws: Workspace) -> None:
    data = "line\n" * 50000  # larger than a pipe buffer
    echoed = ws.exec("wc -l", stdin=data)
    assert echoed.ok and echoed.stdout.strip() == "50000"
    assert ws.exec("exit 3").returncode == 3
    assert ws.exec("pwd").stdout.strip() == str(ws.path)
    missing = ws.exec(["definitely-not-a-command-xyz"])
    assert missing.returncode not in (0, None)
