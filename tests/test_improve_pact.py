"""PACT server, client, policies and launcher, with real servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.models import get_model
from metaeval.protocols.improve.pact import (
    PACT_VERSION,
    ActRequest,
    CommandAction,
    Describe,
    LaunchError,
    ModelPolicy,
    Observation,
    PactClient,
    PactError,
    PactServer,
    ResetRequest,
    ScriptedPolicy,
    Step,
    SubmitAction,
    WriteFileAction,
    action_json_schema,
    free_port,
    launch,
    load_policy,
    parse_action,
)
from metaeval.protocols.improve.pact.action_text import render_observation
from metaeval.protocols.improve.profiles import SystemProfile

SRC = str(Path(__file__).resolve().parents[1] / "src")
PY_ENV = {"PYTHONPATH": os.pathsep.join(p for p in [SRC, os.environ.get("PYTHONPATH")] if p)}
POLICIES = "metaeval.protocols.improve.pact.policies"


def server_profile(policy: str, **overrides) -> SystemProfile:
    command = [
        sys.executable,
        "-m",
        "metaeval.protocols.improve.pact.server",
        "--policy",
        policy,
        "--host",
        "{host}",
        "--port",
        "{port}",
    ]
    fields = {"name": policy.rsplit(":", 1)[-1], "command": command, "env": dict(PY_ENV)}
    fields.update(overrides)
    return SystemProfile(**fields)


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`, read from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            pids.append(int(entry))
    return pids


def pid_running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def reset_req(episode_id: str = "ep-1", **kw) -> ResetRequest:
    return ResetRequest(episode_id=episode_id, task_id="task-1", instruction="say hi", **kw)


def act_req(episode_id: str = "ep-1", **obs) -> ActRequest:
    return ActRequest(
        episode_id=episode_id, observation=Observation(**(obs or {"kind": "initial"}))
    )


def raw(url: str, method: str, path: str, body: bytes | None = None, headers=None):
    """(status, parsed JSON) for one hand-made request."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.fixture
def serve():
    servers: list[PactServer] = []

    def start(policy) -> tuple[PactServer, PactClient]:
        server = PactServer(policy)
        server.start_in_thread()
        servers.append(server)
        return server, PactClient(server.url, timeout_s=10)

    yield start
    for server in servers:
        server.close()


# ---------------------------------------------------------------------------------------------
# In-thread server + client


def test_health_and_describe(serve) -> None:
    server, client = serve(ScriptedPolicy([], name="demo", version="3"))
    assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
    assert client.health() is True
    described = client.describe()
    assert described == Describe(name="demo", version="3", info={"kind": "scripted"})
    assert described.contract == PACT_VERSION
    assert raw(server.url, "GET", "/health") == (200, {"status": "ok"})


def test_episode_sequence(serve) -> None:
    actions = [
        CommandAction(command="ls"),
        Step(WriteFileAction(path="a.txt", content="hi\n"), usage={"output_tokens": 7}),
        SubmitAction(answer="done"),
    ]
    policy = ScriptedPolicy(actions)
    server, client = serve(policy)
    reset = client.reset(reset_req(max_steps=5))
    assert reset.episode_id == "ep-1" and reset.ok
    assert server.active_episode == "ep-1"
    assert policy.resets[0].max_steps == 5

    first = client.act(act_req())
    assert first.action == CommandAction(command="ls") and first.usage == {}
    second = client.act(
        act_req(kind="command_result", step=1, stdout="x\n", exit_code=0),
    )
    assert second.action == WriteFileAction(path="a.txt", content="hi\n")
    assert second.usage == {"output_tokens": 7}
    third = client.act(act_req(kind="file_written", step=2))
    assert third.action == SubmitAction(answer="done")
    assert [o.kind for o in policy.observations] == ["initial", "command_result", "file_written"]
    assert policy.observations[1].stdout == "x\n"

    # the episode is over after submit
    with pytest.raises(PactError) as info:
        client.act(act_req(kind="file_written", step=3))
    assert info.value.kind == "protocol" and info.value.status == 409
    assert info.value.error == "episode_finished"

    # a new reset starts over; the old episode id is no longer accepted
    client.reset(reset_req("ep-2"))
    assert client.act(act_req("ep-2")).action == CommandAction(command="ls")
    with pytest.raises(PactError) as info:
        client.act(act_req("ep-1"))
    assert info.value.status == 409 and info.value.error == "unknown_episode"


def test_bad_requests_give_400(serve) -> None:
    server, _ = serve(ScriptedPolicy([]))
    json_headers = {"Content-Type": "application/json"}
    status, body = raw(server.url, "POST", "/reset", b"{not json", json_headers)
    assert status == 400 and body["error"] == "bad_request" and "not JSON" in body["detail"]

    status, body = raw(server.url, "POST", "/reset", json.dumps({"episode_id": "e"}).encode())
    assert status == 400 and "task_id" in body["detail"]

    extra = reset_req().model_dump() | {"surprise": 1}
    status, body = raw(server.url, "POST", "/reset", json.dumps(extra).encode())
    assert status == 400 and "surprise" in body["detail"]

    bad_obs = {"episode_id": "e", "observation": {"kind": "nonsense"}}
    status, body = raw(server.url, "POST", "/act", json.dumps(bad_obs).encode())
    assert status == 400 and body["error"] == "bad_request"

    status, body = raw(server.url, "POST", "/act", json.dumps([1, 2]).encode())
    assert status == 400


def test_oversized_and_stalled_requests_get_json_errors() -> None:
    """The server reads requests with the loopback kit's bounds (tested in full in
    tests/test_loopback.py) and answers their refusals in PACT's JSON error shape."""
    with PactServer(ScriptedPolicy([]), timeout_s=1.0) as server:
        server.start_in_thread()
        head = f"POST /reset HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        over = (head + f"Content-Length: {40 << 20}\r\n\r\n").encode()  # over 32 MiB
        half = (head + "Content-Length: 100\r\n\r\n{").encode()  # never finished
        for data, status in ((over, 413), (half, 408)):
            with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
                sock.sendall(data)
                response = b""
                while piece := sock.recv(65536):
                    response += piece
            assert response.startswith(f"HTTP/1.0 {status} ".encode()), response
            body = json.loads(response.split(b"\r\n\r\n", 1)[1])
            assert body["error"] == "bad_request" and body["detail"], body
        assert server.active_episode is None
        assert raw(server.url, "GET", "/health")[0] == 200


def test_unknown_path_and_wrong_method(serve) -> None:
    server, client = serve(ScriptedPolicy([]))
    status, body = raw(server.url, "GET", "/nope")
    assert status == 404 and body["error"] == "not_found"
    status, body = raw(server.url, "POST", "/nope", b"{}")
    assert status == 404
    status, body = raw(server.url, "GET", "/act")
    assert status == 405 and body["error"] == "method_not_allowed"
    with pytest.raises(PactError) as info:
        PactClient(server.url + "/prefix", timeout_s=5).describe()
    assert info.value.kind == "protocol" and info.value.status == 404


def test_act_without_reset_is_409(serve) -> None:
    server, client = serve(ScriptedPolicy([]))
    status, body = raw(server.url, "POST", "/act", act_req().model_dump_json().encode())
    assert status == 409 and body["error"] == "unknown_episode"
    with pytest.raises(PactError) as info:
        client.act(act_req())
    assert info.value.kind == "protocol" and info.value.status == 409


def test_policy_exception_is_500(serve) -> None:
    def boom(observation: Observation, index: int):
        raise RuntimeError(f"kaboom at step {index}")

    server, client = serve(ScriptedPolicy(boom))
    client.reset(reset_req())
    status, body = raw(server.url, "POST", "/act", act_req().model_dump_json().encode())
    assert status == 500 and body["error"] == "policy_error"
    assert "RuntimeError: kaboom at step 0" in body["detail"]
    with pytest.raises(PactError) as info:
        client.act(act_req())
    assert info.value.kind == "policy" and "kaboom at step 1" in info.value.detail
    assert client.health() is True  # the server survives policy errors


def test_policy_returning_garbage_is_500(serve) -> None:
    server, client = serve(ScriptedPolicy(lambda obs, i: "not an action"))
    client.reset(reset_req())
    with pytest.raises(PactError) as info:
        client.act(act_req())
    assert info.value.kind == "policy" and "expected an Action" in info.value.detail


def test_reset_exception_is_500_and_leaves_no_episode(serve) -> None:
    class BadReset(ScriptedPolicy):
        def reset(self, request):
            raise ValueError("cannot start")

    server, client = serve(BadReset([]))
    with pytest.raises(PactError) as info:
        client.reset(reset_req())
    assert info.value.kind == "policy" and "cannot start" in info.value.detail
    assert server.active_episode is None


def test_health_answers_while_an_act_is_running(serve) -> None:
    release = threading.Event()

    def slow(observation, index):
        release.wait(10)
        return SubmitAction()

    server, client = serve(ScriptedPolicy(slow))
    client.reset(reset_req())
    result: list = []
    worker = threading.Thread(target=lambda: result.append(client.act(act_req())))
    worker.start()
    time.sleep(0.2)
    start = time.monotonic()
    assert client.health() and client.describe().name == "scripted-policy"
    assert time.monotonic() - start < 8  # not behind the act, which holds for 10 s
    release.set()
    worker.join(10)
    assert result[0].action == SubmitAction()


# ---------------------------------------------------------------------------------------------
# Client failure kinds


def test_client_unreachable_fails_fast() -> None:
    port = free_port()
    client = PactClient(f"http://127.0.0.1:{port}", timeout_s=30)
    start = time.monotonic()
    assert client.health() is False
    with pytest.raises(PactError) as info:
        client.describe()
    assert info.value.kind == "unreachable"
    with pytest.raises(PactError) as info:
        client.act(act_req())
    assert info.value.kind == "unreachable"
    assert time.monotonic() - start < 20  # not the client's 30-s timeout


def test_client_timeout(serve) -> None:
    release = threading.Event()

    def slow(observation, index):
        release.wait(10)
        return SubmitAction()

    server, _ = serve(ScriptedPolicy(slow))
    client = PactClient(server.url, timeout_s=0.5)
    client.reset(reset_req())
    start = time.monotonic()
    with pytest.raises(PactError) as info:
        client.act(act_req())
    assert info.value.kind == "timeout"
    assert time.monotonic() - start < 8  # the policy would answer only after 10 s
    release.set()


class _FakeHandler(BaseHTTPRequestHandler):
    """Serves canned bodies: /describe -> not JSON; /reset -> wrong shape; /act -> cut short."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._reply(b"<html>hello</html>")

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/reset":
            self._reply(b'{"unexpected": true}')
        else:
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"episode_id": "ep-1", ')
            self.wfile.flush()
            self.close_connection = True

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_client_protocol_errors() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        client = PactClient(f"http://127.0.0.1:{httpd.server_address[1]}", timeout_s=5)
        assert client.health() is False  # 200 but not {"status": "ok"}
        for call in (client.describe, lambda: client.reset(reset_req())):
            with pytest.raises(PactError) as info:
                call()
            assert info.value.kind == "protocol"
        with pytest.raises(PactError) as info:
            client.act(act_req())
        assert info.value.kind == "protocol" and "cut short" in info.value.detail
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_client_rejects_bad_base_url() -> None:
    with pytest.raises(ValueError):
        PactClient("127.0.0.1:8000")


# ---------------------------------------------------------------------------------------------
# Policies


def test_parse_action_variants() -> None:
    assert parse_action('{"action": {"type": "command", "command": "ls"}}') == CommandAction(
        command="ls"
    )
    assert parse_action('{"type": "submit", "answer": "42"}') == SubmitAction(answer="42")
    fenced = 'Sure:\n```json\n{"path": "a.py", "content": "x = 1\\n"}\n```'
    assert parse_action(fenced) == WriteFileAction(path="a.py", content="x = 1\n")
    for bad in ["", "no json here", '{"type": "command"}', '{"type": "dance"}', "[1]"]:
        with pytest.raises(ValueError):
            parse_action(bad)


def test_action_schema_shape() -> None:
    schema = action_json_schema()
    assert schema["type"] == "object" and schema["required"] == ["action"]
    kinds = [s["properties"]["type"]["enum"] for s in schema["properties"]["action"]["anyOf"]]
    assert kinds == [["command"], ["write_file"], ["submit"]]


def test_action_schema_is_the_models_model_facing_fields() -> None:
    # The schema is generated from the action models parse_action validates with; what a
    # provider receives stays the wire form it always was (written out here by hand).
    schema = action_json_schema()
    branches = schema["properties"]["action"]["anyOf"]
    for branch, model in zip(branches, (CommandAction, WriteFileAction, SubmitAction), strict=True):
        kind = model.model_fields["type"].default
        assert branch["properties"]["type"] == {"type": "string", "enum": [kind]}
        asked = [
            n for n, f in model.model_fields.items() if f.is_required() or f.default is not None
        ]
        assert branch["required"] == asked and list(branch["properties"]) == asked
        assert branch["additionalProperties"] is False
        # every reply the schema allows parses into this model
        reply = {name: kind if name == "type" else "x" for name in branch["required"]}
        assert type(parse_action(json.dumps({"action": reply}))) is model
    assert [b["required"] for b in branches] == [
        ["type", "command"],
        ["type", "path", "content"],
        ["type", "answer"],
    ]
    assert "timeout_s" not in branches[0]["properties"]  # a harness-side option, not asked for
    assert schema["required"] == ["action"] and schema["additionalProperties"] is False


def test_render_observation() -> None:
    text = render_observation(
        Observation(kind="command_result", step=3, stdout="a" * 100, stderr="oops", exit_code=2),
        limit=30,
    )
    assert "exit code 2" in text and "stderr:\noops" in text and "omitted" in text
    assert "timed out" in render_observation(Observation(kind="command_result", timed_out=True))


def test_model_policy_history_and_schema() -> None:
    model = get_model(
        "scripted/pact",
        responses=[
            {
                "text": '{"action": {"type": "command", "command": "ls"}}',
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
            {"text": '{"action": {"type": "submit", "answer": "ok"}}'},
        ],
    )
    policy = ModelPolicy(model, max_tokens=64, seed=3)
    assert policy.describe().info["model"] == "scripted/pact"
    policy.reset(reset_req(max_steps=7))
    step = policy.act(Observation(kind="initial"))
    assert step.action == CommandAction(command="ls")
    assert step.usage == {"input_tokens": 10, "output_tokens": 5}
    step = policy.act(Observation(kind="command_result", step=1, stdout="f.txt\n", exit_code=0))
    assert step.action == SubmitAction(answer="ok")

    first, second = model.requests
    assert first.json_schema == action_json_schema()
    assert first.max_tokens == 64 and first.seed == 3
    assert [m.role for m in first.messages] == ["system", "user"]
    assert "say hi" in first.messages[1].content and "7 steps" in first.messages[1].content
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user"]
    assert "f.txt" in second.messages[3].content


def test_model_policy_retries_once_then_submits_empty() -> None:
    model = get_model(
        "scripted/pact",
        responses=[
            "garbage",
            '{"type": "command", "command": "pwd"}',
            "bad",
            {
                "text": '{"action": {"type": "write_file", "content": "aaa',
                "finish_reason": "length",
            },
        ],
    )
    policy = ModelPolicy(model)
    policy.reset(reset_req())
    step = policy.act(Observation(kind="initial"))
    assert step.action == CommandAction(command="pwd") and step.note == ""
    retry = model.requests[1].messages
    assert retry[-2].content == "garbage" and "not a valid action" in retry[-1].content

    step = policy.act(Observation(kind="command_result", step=1, exit_code=0))
    assert step.action == SubmitAction(answer="") and "malformed" in step.note
    assert "cut off at max_tokens" in step.note
    assert policy.notes == [step.note]
    # failed attempts are not kept in the episode history
    assert [m.role for m in policy.messages] == ["system", "user", "assistant", "user", "assistant"]


def test_model_policy_requires_reset() -> None:
    policy = ModelPolicy(get_model("scripted/pact", responses=[]))
    with pytest.raises(Exception, match="before reset"):
        policy.act(Observation(kind="initial"))


def test_model_policy_provider_error_keeps_history() -> None:
    calls = {"n": 0}

    def flaky(request):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("provider down")
        return '{"type": "submit", "answer": "x"}'

    policy = ModelPolicy(get_model("scripted/pact", responses=flaky))
    policy.reset(reset_req())
    before = list(policy.messages)
    with pytest.raises(Exception, match="provider down"):
        policy.act(Observation(kind="initial"))
    assert policy.messages == before
    assert policy.act(Observation(kind="initial")).action == SubmitAction(answer="x")


def test_model_policy_history_window() -> None:
    model = get_model("scripted/pact", responses=lambda req: '{"type": "command", "command": "ls"}')
    policy = ModelPolicy(model, max_history_chars=3000)
    policy.reset(reset_req())
    policy.act(Observation(kind="initial"))
    for i in range(1, 20):
        policy.act(Observation(kind="command_result", step=i, stdout="y" * 400, exit_code=0))
    sent = model.requests[-1].messages
    assert sum(len(m.content) for m in sent) <= 3000 + 1000
    assert [m.role for m in sent[:3]] == ["system", "user", "assistant"]
    assert sent[-1].role == "user" and "Step 19" in sent[-1].content
    assert len(policy.messages) > len(sent)


def test_load_policy() -> None:
    policy = load_policy(f"{POLICIES}:echo_policy")
    assert policy.describe().name == "echo-policy"
    scripted = load_policy(f"{POLICIES}:ScriptedPolicy", actions=[SubmitAction()], name="x")
    assert scripted.describe().name == "x"
    for bad in ["nocolon", "no_such_module_xyz:f", f"{POLICIES}:missing", f"{POLICIES}:log"]:
        with pytest.raises(ConfigError):
            load_policy(bad)


# ---------------------------------------------------------------------------------------------
# Launcher (real subprocesses)


def test_launch_echo_server_episode_and_stop(tmp_path: Path) -> None:
    profile = server_profile(f"{POLICIES}:echo_policy", startup_timeout_s=30)
    log_path = tmp_path / "logs" / "echo.log"
    with launch(profile, log_path=log_path) as system:
        assert system.alive() and system.healthy()
        assert system.base_url == f"http://127.0.0.1:{system.port}"
        assert group_pids(system.pgid) == [system.pid]
        client = system.client(timeout_s=10)
        assert client.describe().name == "echo-policy"
        client.reset(ResetRequest(episode_id="e", task_id="t", instruction="hello 'world'"))
        action = client.act(ActRequest(episode_id="e", observation=Observation(kind="initial")))
        assert isinstance(action.action, CommandAction)
        assert "hello" in action.action.command
        done = client.act(
            act_req("e", kind="command_result", step=1, stdout="hello 'world'\n", exit_code=0)
        )
        assert done.action == SubmitAction(answer="hello 'world'")
        pid, pgid = system.pid, system.pgid
        # A generous grace: under the full suite's load a clean shutdown once took over 3 s.
        system.stop(grace_s=10)
    assert system.returncode() == 0  # SIGTERM is a clean shutdown
    assert not system.alive()
    assert not pid_running(pid) and group_pids(pgid) == []
    assert system.stop() == 0  # idempotent
    log = log_path.read_text()
    assert f"PACT listening on {system.base_url}" in log
    assert "# launch echo_policy" in log


def test_launched_server_dies_with_a_harness_killed_by_sigkill(tmp_path: Path) -> None:
    """No orphans: SIGKILL on the launching process takes its PACT server down with it."""
    profile = server_profile(f"{POLICIES}:echo_policy", startup_timeout_s=30)
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from metaeval.protocols.improve.pact.launcher import launch\n"
        "from metaeval.protocols.improve.profiles import SystemProfile\n"
        "profile = SystemProfile.model_validate_json(sys.argv[1])\n"
        "system = launch(profile, log_path=Path(sys.argv[2]))\n"
        "print(system.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    harness = subprocess.Popen(
        [sys.executable, "-c", script, profile.model_dump_json(), str(tmp_path / "s.log")],
        stdout=subprocess.PIPE,
        text=True,
    )
    server_pid = None
    try:
        server_pid = int(harness.stdout.readline())
        assert pid_running(server_pid)
        harness.kill()
        harness.wait(timeout=10)
        deadline = time.monotonic() + 10
        while pid_running(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_running(server_pid), "the PACT server outlived its killed harness"
    finally:
        harness.kill()
        if server_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server_pid, signal.SIGKILL)


def test_launch_never_healthy_times_out(tmp_path: Path) -> None:
    profile = SystemProfile(
        name="sleeper",
        command=[
            sys.executable,
            "-c",
            "import time; print('sleeping', flush=True); time.sleep(60)",
        ],
        startup_timeout_s=1.5,
    )
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        launch(profile, log_path=tmp_path / "sleeper.log")
    elapsed = time.monotonic() - start
    assert 1.4 <= elapsed < 1.5 + 4
    assert "not healthy" in str(info.value) and "sleeping" in info.value.log_tail
    pids = [
        int(e) for e in os.listdir("/proc") if e.isdigit() and "time.sleep(60)" in _cmdline(int(e))
    ]
    assert pids == []


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def test_launch_command_exits_immediately(tmp_path: Path) -> None:
    profile = SystemProfile(
        name="quitter",
        command=[sys.executable, "-c", "import sys; print('boom-marker'); sys.exit(3)"],
        startup_timeout_s=20,
    )
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        launch(profile, log_path=tmp_path / "quitter.log")
    assert time.monotonic() - start < 5
    assert "exited with code 3" in str(info.value)
    assert "boom-marker" in info.value.log_tail and "boom-marker" in str(info.value)


def test_launch_missing_executable(tmp_path: Path) -> None:
    profile = SystemProfile(name="ghost", command=["/nonexistent/pact-server"])
    with pytest.raises(LaunchError, match="cannot start"):
        launch(profile, log_path=tmp_path / "ghost.log")


def test_launch_bad_policy_spec_reports_log(tmp_path: Path) -> None:
    profile = server_profile("no_such_module_xyz:factory", startup_timeout_s=20)
    with pytest.raises(LaunchError) as info:
        launch(profile, log_path=tmp_path / "bad.log")
    assert "exited with code 2" in str(info.value)
    assert "no_such_module_xyz" in info.value.log_tail


def test_launch_fills_placeholders_and_hides_env_values(tmp_path: Path) -> None:
    port = free_port()
    script = (
        "import os, sys; print('port-env', os.environ['PACT_PORT'], sys.argv[1], sys.argv[2]);"
        "print('secret-len', len(os.environ['PACT_TEST_SECRET'])); sys.exit(1)"
    )
    profile = SystemProfile(
        name="placeholders",
        command=[sys.executable, "-c", script, "{host}", "{port}"],
        env={"PACT_PORT": "{port}"},
        port=port,
        cwd=tmp_path,
    )
    log_path = tmp_path / "p.log"
    with pytest.raises(LaunchError):
        launch(profile, log_path=log_path, extra_env={"PACT_TEST_SECRET": "s3cr3t-value"})
    log = log_path.read_text()
    assert f"port-env {port} 127.0.0.1 {port}" in log
    assert "secret-len 12" in log
    assert "s3cr3t-value" not in log and "PACT_TEST_SECRET" in log


def test_server_dies_mid_episode(tmp_path: Path) -> None:
    profile = server_profile(f"{POLICIES}:crash_policy", startup_timeout_s=30)
    with launch(profile, log_path=tmp_path / "crash.log") as system:
        client = system.client(timeout_s=10)
        client.reset(reset_req())
        first = client.act(act_req())
        assert first.action == CommandAction(command="true")
        start = time.monotonic()
        with pytest.raises(PactError) as info:
            client.act(act_req(kind="command_result", step=1, exit_code=0))
        assert info.value.kind in ("unreachable", "protocol")
        assert time.monotonic() - start < 8  # not the client's 10-s timeout
        deadline = time.monotonic() + 30
        while system.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert system.alive() is False
        assert system.returncode() == 1
        assert client.health() is False
        with pytest.raises(PactError) as info:
            client.describe()
        assert info.value.kind == "unreachable"
    assert group_pids(system.pgid) == []


# ---------------------------------------------------------------------------------------------
# The real local model


@pytest.mark.local_model
def test_model_policy_with_local_smollm2(serve) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from metaeval.models.local import find_smollm2_gguf

    if find_smollm2_gguf() is None:
        pytest.skip("the bundled SmolLM2 GGUF is not installed")
    policy = ModelPolicy(get_model("local/smollm2"), max_tokens=128)
    server, client = serve(policy)
    client = PactClient(server.url, timeout_s=120)
    assert client.describe().info["model"] == "local/smollm2"
    client.reset(
        ResetRequest(
            episode_id="lm",
            task_id="hello",
            instruction="Create a file named hello.txt that contains the word hello.",
            max_steps=5,
        )
    )
    response = client.act(ActRequest(episode_id="lm", observation=Observation(kind="initial")))
    assert isinstance(response.action, CommandAction | WriteFileAction | SubmitAction)
    assert response.usage["input_tokens"] > 0 and response.usage["output_tokens"] > 0


@pytest.mark.local_model
def test_server_entry_point_serves_a_model(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from metaeval.models.local import find_smollm2_gguf

    if find_smollm2_gguf() is None:
        pytest.skip("the bundled SmolLM2 GGUF is not installed")
    command = [
        sys.executable,
        "-m",
        "metaeval.protocols.improve.pact.server",
        "--model",
        "local/smollm2",
        "--max-tokens",
        "64",
        "--port",
        "{port}",
    ]
    profile = SystemProfile(name="smollm2", command=command, env=PY_ENV, startup_timeout_s=120)
    with launch(profile, log_path=tmp_path / "smollm2.log") as system:
        described = system.client(timeout_s=30).describe()
        assert described.info == {"kind": "model", "model": "local/smollm2", "max_tokens": 64}
    assert not system.alive() and group_pids(system.pgid) == []


def test_a_launched_server_answers_only_the_harness_on_its_own_host(tmp_path: Path) -> None:
    """The launched server takes its token from the launcher: requests without it (another
    local process), naming another Host (DNS rebinding) or from a web page are refused before
    any policy code runs; the harness's own client and the health probe get through."""
    profile = server_profile(f"{POLICIES}:echo_policy", startup_timeout_s=30)
    with launch(profile, log_path=tmp_path / "echo.log") as system:
        assert system.token and system.token not in (tmp_path / "echo.log").read_text()
        url, port = system.base_url, system.port
        reset = ResetRequest(episode_id="e", task_id="t", instruction="hi").model_dump_json()
        bearer = {"Authorization": f"Bearer {system.token}"}
        status, body = raw(url, "POST", "/reset", reset.encode())
        assert status == 401 and body["error"] == "refused"
        status, body = raw(url, "POST", "/reset", reset.encode(), {"Authorization": "Bearer x"})
        assert status == 401
        status, _ = raw(url, "GET", "/describe", None, {**bearer, "Host": f"evil.example:{port}"})
        assert status == 421
        status, _ = raw(url, "GET", "/describe", None, {**bearer, "Origin": "http://evil.example"})
        assert status == 403
        status, body = raw(url, "GET", "/health")
        assert status == 200 and body["status"] == "ok"
        status, body = raw(url, "GET", "/describe", None, bearer)
        assert status == 200 and body["name"] == "echo-policy"
        assert system.client(timeout_s=10).describe().name == "echo-policy"
