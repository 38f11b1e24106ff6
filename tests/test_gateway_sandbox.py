"""Network policy of a CLI on a gateway: inside the sandbox only the relay on 127.0.0.1 answers,
and only to the run's token; the host's loopback services and every non-loopback address are
out of reach."""

from __future__ import annotations

import json
import os
import sys

import pytest

from metaeval.gateway import Gateway
from metaeval.gateway.attach import RELAY_SCRIPT, SANDBOX_PORT, open_link
from metaeval.models.scripted import ScriptedModel
from metaeval.sandbox.bwrap import bwrap_available
from metaeval.sandbox.workspace import Workspace

pytestmark = pytest.mark.bwrap

PROBE = """
import json, socket, sys, urllib.error, urllib.request
out = {}
relay = "http://127.0.0.1:%d"
out["relay"] = json.loads(urllib.request.urlopen(relay + "/", timeout=5).read())
body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
for name, key in [("no_token", None), ("wrong_token", "mgw-wrong"), ("token", "%s")]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    request = urllib.request.Request(relay + "/v1/chat/completions", body, headers)
    try:
        out[name] = urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as exc:
        out[name] = exc.code
for name, host, port in [("host_gateway", "127.0.0.1", %d), ("outside", "%s", 80)]:
    try:
        socket.create_connection((host, port), timeout=3).close()
        out[name] = "connected"
    except OSError as exc:
        out[name] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(out))
"""


def outside_address() -> str:
    """A non-loopback address of this host (the one its default route would use)."""
    import socket

    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for UDP connect
        return probe.getsockname()[0]
    except OSError:
        return "192.0.2.1"
    finally:
        probe.close()


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap unavailable")
def test_sandboxed_cli_reaches_the_gateway_and_nothing_else(tmp_path):
    model = ScriptedModel(["hello"], name="scripted/net")
    with Gateway(model) as gw:
        link = open_link(gw, "probe", sandboxed=True)
        try:
            ws = Workspace(tmp_path)
            code = PROBE % (SANDBOX_PORT, link.token, gw.port, outside_address())
            result = ws.exec(
                link.wrap([os.path.realpath(sys.executable), "-I", "-c", code]),
                timeout_s=60,
                network=False,
                extra_ro_binds=[RELAY_SCRIPT.parent],
                extra_rw_binds=[link.socket_dir],
            )
        finally:
            link.close()
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["relay"] == {"status": "ok", "model": "scripted/net"}
    assert (seen["no_token"], seen["wrong_token"], seen["token"]) == (401, 401, 200)
    assert len(model.requests) == 1
    assert seen["host_gateway"].startswith("ConnectionRefusedError"), seen
    assert seen["outside"] != "connected" and "unreachable" in seen["outside"].lower(), seen
    assert link.base_url == f"http://127.0.0.1:{SANDBOX_PORT}"


def test_relay_passes_on_the_exit_status(tmp_path):
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-I",
            str(RELAY_SCRIPT),
            "0",
            str(tmp_path / "none.sock"),
            "--",
            "sh",
            "-c",
            "exit 7",
        ],
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 7
    done = subprocess.run(
        [sys.executable, "-I", str(RELAY_SCRIPT), "0", "x.sock", "--", "/no/such/binary"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 127 and "cannot run /no/such/binary" in done.stderr
