"""A streamed answer from a slow model: the gateway sends its headers early and heartbeats
until the model answers, so a client with a short headers timeout (Gemini CLI: 60 s) does not
fail with a transport error on a loaded machine. Checked with the official OpenAI and Anthropic
SDKs (their SSE parsers must skip the heartbeats) and, for the Gemini API, over a raw socket with
the Gemini SDK's own event pattern. The model is held until the gateway has committed its
headers, so nothing depends on how fast the machine is."""

from __future__ import annotations

import http.client
import json
import re
import time
from typing import Any

import pytest

from metaeval.gateway import Gateway
from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import ModelRequest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

# the event pattern of the Gemini SDK (@google/genai) that Gemini CLI bundles
GEMINI_EVENT = re.compile(r"^\s*data: (.*)(?:\n\n|\r\r|\r\n\r\n)")


class Held:
    """A model that answers only once the gateway has sent the headers of the stream it is
    working for (and fails instead when `fail` is set)."""

    def __init__(self, text: str = "slow answer", fail: bool = False):
        self.text, self.fail = text, fail
        self.gateway: Gateway | None = None

    def __call__(self, request: ModelRequest) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.gateway is not None
            if any(r.get("headers_early") for r in self.gateway.exchanges.snapshot()):
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the gateway never sent the headers early")
        time.sleep(0.3)  # a few heartbeats go out meanwhile (heartbeat_s below is 0.05)
        if self.fail:
            raise RuntimeError("model fell over")
        return {"text": self.text, "usage": {"input_tokens": 12, "output_tokens": 2}}


def slow_gateway(held: Held) -> Gateway:
    model = ScriptedModel(held, name="scripted/slow")
    gateway = Gateway(model, stream_commit_s=0.01, heartbeat_s=0.05)
    held.gateway = gateway
    return gateway


def raw_stream(gw: Gateway, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
    try:
        headers = {"Content-Type": "application/json", "x-goog-api-key": gw.token}
        conn.request("POST", path, json.dumps(body).encode(), headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


GEMINI_PATH = "/v1beta/models/scripted-slow:streamGenerateContent?alt=sse"
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def gemini_events(raw: bytes) -> list[dict[str, Any]]:
    """Events as the Gemini SDK reads them: the pattern from the start of the buffer."""
    buffer, events = raw.decode(), []
    while match := GEMINI_EVENT.match(buffer):
        events.append(json.loads(match[1]))
        buffer = buffer[match.end() :]
    assert buffer.strip() == "", f"left unread: {buffer[:80]!r}"
    return events


def test_a_slow_gemini_stream_gets_early_headers_heartbeats_and_its_answer():
    held = Held()
    with slow_gateway(held) as gw:
        status, headers, raw = raw_stream(gw, GEMINI_PATH, GEMINI_BODY)
        (record,) = gw.exchanges.snapshot()
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    assert raw.startswith(b"\n")  # a heartbeat came before the first event
    events = gemini_events(raw)
    text = "".join(
        p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"]
    )
    assert text == "slow answer"
    assert record["headers_early"] is True and record["status"] == 200
    assert record["usage"]["output_tokens"] == 2


def test_a_model_failing_after_the_headers_is_an_error_inside_the_stream():
    with slow_gateway(Held(fail=True)) as gw:
        status, _, raw = raw_stream(gw, GEMINI_PATH, GEMINI_BODY)
        (record,) = gw.exchanges.snapshot()
    assert status == 200  # committed before the model failed
    error = json.loads(raw.strip().splitlines()[-1])  # the SDK parses the chunk as JSON
    assert error["error"]["code"] == 500 and "model fell over" in error["error"]["message"]
    assert record["status"] == 500 and "model fell over" in record["error"]


def test_openai_sdk_reads_a_slow_chat_stream_through_its_heartbeats():
    held = Held()
    with slow_gateway(held) as gw:
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0)
        stream = client.chat.completions.create(
            model="scripted/slow", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "slow answer"


def test_openai_sdk_sees_a_late_model_error_as_an_api_error():
    with slow_gateway(Held(fail=True)) as gw:
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0)
        stream = client.chat.completions.create(
            model="scripted/slow", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(openai.APIError, match="model fell over"):
            list(stream)


def test_anthropic_sdk_reads_a_slow_stream_through_its_pings():
    held = Held()
    with slow_gateway(held) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
        with client.messages.stream(
            model="claude-x", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            text = "".join(stream.text_stream)
    assert text == "slow answer"


def test_anthropic_sdk_sees_a_late_model_error_as_an_api_error():
    with slow_gateway(Held(fail=True)) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
        messages = [{"role": "user", "content": "hi"}]
        with (
            pytest.raises(anthropic.APIStatusError, match="model fell over"),
            client.messages.stream(model="claude-x", max_tokens=50, messages=messages) as stream,
        ):
            list(stream.text_stream)


def test_openai_sdk_reads_a_slow_responses_stream():
    held = Held()
    with slow_gateway(held) as gw:
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0)
        stream = client.responses.create(model="scripted/slow", input="hi", stream=True)
        done = [e for e in stream if e.type == "response.completed"]
    assert done and done[0].response.output_text == "slow answer"


def test_a_quick_answer_keeps_its_headers_until_it_is_ready():
    """Below the commit time nothing changes: one response with the model-time header."""
    model = ScriptedModel(lambda request: "quick", name="scripted/quick")
    with Gateway(model, stream_commit_s=60, heartbeat_s=60) as gw:
        status, headers, raw = raw_stream(gw, GEMINI_PATH, GEMINI_BODY)
        (record,) = gw.exchanges.snapshot()
    assert status == 200 and "X-Metaeval-Model-Seconds" in headers
    assert not raw.startswith(b"\n") and "headers_early" not in record
    assert gemini_events(raw)[-1]["candidates"][0]["content"]["parts"][0]["text"] == "quick"


def test_a_cli_that_gave_up_on_a_slow_answer_is_an_infrastructure_error():
    """The CLI closed its connection while the gateway was still answering (what 'fetch failed'
    was): the failed run is the link's fault, classified infra (and so retried), not the
    agent's error."""
    import socket
    import threading

    from metaeval.agents.cli.gemini_cli import GeminiCliAdapter
    from metaeval.agents.cli.outcome import settle_with_gateway
    from metaeval.agents.types import AgentResult
    from metaeval.gateway.attach import open_link

    release = threading.Event()

    def held(request: ModelRequest) -> str:
        release.wait(60)
        return "late"

    with Gateway(ScriptedModel(held, name="scripted/held"), stream_commit_s=60) as gw:
        link = open_link(gw, "run-1", sandboxed=False)
        port = int(link.address.rsplit(":", 1)[1])
        body = json.dumps(GEMINI_BODY).encode()
        head = (
            f"POST {GEMINI_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"x-goog-api-key: {link.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(head + body)
            deadline = time.monotonic() + 60
            while not gw.exchanges.for_client("run-1") and time.monotonic() < deadline:
                time.sleep(0.02)
        failed = AgentResult(status="error", error="unknown: fetch failed sending request")
        settled = settle_with_gateway(failed, link, GeminiCliAdapter(model="scripted/held"))
        release.set()  # the answer comes after the client left: recorded as 499, not 200
        (record,) = gw.exchanges.for_client("run-1")
        while "status" not in record and time.monotonic() < deadline:
            time.sleep(0.02)
        later = settle_with_gateway(failed, link, GeminiCliAdapter(model="scripted/held"))
        timed_out = settle_with_gateway(
            AgentResult(status="timeout", error="ran out of time"), link, GeminiCliAdapter()
        )
        link.close()
    assert settled.infra_error is True
    assert "transport: the CLI gave up" in (settled.error or "")
    assert record["status"] == 499 and record["error"] == "client went away before the answer"
    assert later.infra_error is True
    assert timed_out.infra_error is False  # a run killed at its limit stays a timeout
