"""The gateway on 127.0.0.1, spoken to by the official Anthropic and OpenAI SDKs (their own
parsers check the wire format, JSON and SSE) and by raw HTTP for the Gemini API."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

import pytest

from metaeval.gateway import Gateway
from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import ModelRequest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

READ_TOOL = {
    "name": "read_file",
    "description": "Read a file.",
    "schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


def two_step(request: ModelRequest) -> dict[str, Any]:
    """First a tool call, then (once a tool result came back) a text answer quoting it."""
    results = [m for m in request.messages if m.role == "tool"]
    usage = {"input_tokens": 30 + len(request.messages), "output_tokens": 4}
    if not results:
        call = {"id": "call_7", "name": "read_file", "arguments": {"path": "a.txt"}}
        return {"tool_calls": [call], "usage": usage, "finish_reason": "tool_calls"}
    return {"text": f"file says {results[-1].content}", "usage": usage}


@pytest.fixture
def gateway():
    model = ScriptedModel(two_step, name="scripted/gw")
    with Gateway(model) as gw:
        yield gw, model


def post(
    url: str, body: Any, headers: dict[str, str] | None = None, key: str | None = None
) -> tuple[int, bytes]:
    """POST `body` as JSON, with `key` (the gateway token) as a bearer token when given."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    auth = {"authorization": f"Bearer {key}"} if key else {}
    request = urllib.request.Request(
        url, data=data, headers={"content-type": "application/json", **auth, **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


# ---------------------------------------------------------------------------------------------
# Anthropic Messages


def anthropic_tools():
    return [
        {
            "name": READ_TOOL["name"],
            "description": READ_TOOL["description"],
            "input_schema": READ_TOOL["schema"],
        }
    ]


def test_anthropic_json_tool_use_round_trip(gateway):
    gw, model = gateway
    client = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
    first = client.messages.create(
        model="claude-x",
        max_tokens=100,
        system="be brief",
        messages=[{"role": "user", "content": "read a.txt"}],
        tools=anthropic_tools(),
    )
    assert first.stop_reason == "tool_use" and first.model == "claude-x"
    block = first.content[0]
    assert (block.type, block.id, block.name, block.input) == (
        "tool_use",
        "call_7",
        "read_file",
        {"path": "a.txt"},
    )
    assert first.usage.input_tokens == 32 and first.usage.output_tokens == 4
    second = client.messages.create(
        model="claude-x",
        max_tokens=100,
        messages=[
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": [block.model_dump()]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_7", "content": "hello"}],
            },
        ],
        tools=anthropic_tools(),
    )
    assert second.stop_reason == "end_turn" and second.content[0].text == "file says hello"
    # what the model received: system first, the call, and the result answering call_7
    seen = model.requests[1]
    assert [m.role for m in seen.messages] == ["user", "assistant", "tool"]
    assert seen.messages[1].tool_calls[0].arguments == {"path": "a.txt"}
    assert seen.messages[2].tool_call_id == "call_7"
    assert model.requests[0].messages[0].content == "be brief"
    assert seen.tools[0].parameters == READ_TOOL["schema"]


def test_anthropic_stream_matches_json_and_counts_tokens(gateway):
    gw, _ = gateway
    client = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
    with client.messages.stream(
        model="claude-x",
        max_tokens=50,
        messages=[{"role": "user", "content": "go"}],
        tools=anthropic_tools(),
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert final.content[0].type == "tool_use" and final.content[0].input == {"path": "a.txt"}
    assert final.usage.input_tokens == 31 and final.usage.output_tokens == 4
    counted = client.messages.count_tokens(
        model="claude-x", messages=[{"role": "user", "content": "x" * 400}]
    )
    assert 100 <= counted.input_tokens <= 110  # scripted models have no tokenizer: 4 chars/token
    # HEAD / (Claude Code's connectivity probe) and model listing in Anthropic's shape
    head = urllib.request.urlopen(urllib.request.Request(gw.url + "/", method="HEAD"), timeout=5)
    assert head.status == 200
    assert [m.id for m in client.models.list().data] == ["scripted/gw"]


# ---------------------------------------------------------------------------------------------
# OpenAI Responses and Chat Completions


def test_openai_responses_stream_tool_call_and_output(gateway):
    gw, model = gateway
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0)
    tools = [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a file.",
            "parameters": READ_TOOL["schema"],
        }
    ]
    events = list(
        client.responses.create(
            model="gpt-x", input="read a.txt", instructions="be brief", tools=tools, stream=True
        )
    )
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    final = events[-1].response
    call = final.output[0]
    assert (call.type, call.call_id, call.name, json.loads(call.arguments)) == (
        "function_call",
        "call_7",
        "read_file",
        {"path": "a.txt"},
    )
    assert final.usage.input_tokens == 32 and final.usage.output_tokens == 4
    followup = [
        {"role": "user", "content": "read a.txt"},
        {
            "type": "function_call",
            "call_id": "call_7",
            "name": "read_file",
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": "call_7", "output": "hi"},
    ]
    answer = client.responses.create(model="gpt-x", input=followup, tools=tools)
    assert answer.output_text == "file says hi"
    assert [m.role for m in model.requests[-1].messages] == ["user", "assistant", "tool"]


def test_openai_chat_json_and_stream_with_usage(gateway):
    gw, _ = gateway
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "d",
                "parameters": READ_TOOL["schema"],
            },
        }
    ]
    messages = [{"role": "user", "content": "read"}]
    first = client.chat.completions.create(model="m", messages=messages, tools=tools)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls[0].function.name == "read_file"
    assert first.usage.prompt_tokens == 31 and first.usage.completion_tokens == 4
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_7", "content": "yo"},
    ]
    chunks = list(
        client.chat.completions.create(
            model="m",
            messages=messages,
            tools=tools,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "file says yo"
    assert chunks[-1].usage.prompt_tokens == 33 and chunks[-1].choices == []
    assert [m.id for m in client.models.list().data] == ["scripted/gw"]


# ---------------------------------------------------------------------------------------------
# Gemini


def gemini_body(contents):
    decl = {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "OBJECT", "properties": {"path": {"type": "STRING"}}},
    }
    return {
        "contents": contents,
        "tools": [{"functionDeclarations": [decl]}],
        "systemInstruction": {"parts": [{"text": "be brief"}]},
    }


def test_gemini_generate_stream_and_count(gateway):
    gw, model = gateway
    base = gw.url + "/v1beta/models/gemini-x"
    key = {"x-goog-api-key": gw.token}  # how Gemini clients send their API key
    status, raw = post(
        base + ":generateContent",
        gemini_body([{"role": "user", "parts": [{"text": "read"}]}]),
        key,
    )
    assert status == 200
    reply = json.loads(raw)
    part = reply["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"]["name"] == "read_file" and part["functionCall"]["args"] == {
        "path": "a.txt"
    }
    assert reply["usageMetadata"]["promptTokenCount"] == 32
    assert (
        model.requests[0].tools[0].parameters["properties"]["path"]["type"] == "string"
    )  # lowered
    contents = [
        {"role": "user", "parts": [{"text": "read"}]},
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "read_file", "args": {"path": "a.txt"}}}],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "hey"}}}],
        },
    ]
    status, raw = post(
        base + f":streamGenerateContent?alt=sse&key={gw.token}", gemini_body(contents)
    )  # or as the key parameter
    assert status == 200
    events = [
        json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")
    ]
    assert events[-1]["candidates"][0]["content"]["parts"][0]["text"] == "file says hey"
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    seen = model.requests[-1]
    assert (
        seen.messages[3].role == "tool"
        and seen.messages[3].tool_call_id == seen.messages[2].tool_calls[0].id
    )
    status, raw = post(
        base + ":countTokens",
        {"contents": [{"role": "user", "parts": [{"text": "y" * 80}]}]},
        key,
    )
    assert status == 200 and 20 <= json.loads(raw)["totalTokens"] <= 25
    listed = urllib.request.Request(gw.url + "/v1beta/models", headers=key)
    listing = json.loads(urllib.request.urlopen(listed, timeout=5).read())
    assert listing["models"][0]["name"] == "models/scripted/gw"


# ---------------------------------------------------------------------------------------------
# Bad input, model errors, recording


def test_bad_requests_get_400_naming_the_field(gateway):
    gw, model = gateway
    key = gw.token
    status, raw = post(gw.url + "/v1/messages", b"{not json", key=key)
    assert status == 400 and "not JSON" in json.loads(raw)["error"]["message"]
    body = {"model": "m", "max_tokens": 5, "messages": []}
    status, raw = post(gw.url + "/v1/messages", body, key=key)
    assert status == 400 and "field 'messages'" in json.loads(raw)["error"]["message"]
    status, raw = post(
        gw.url + "/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]}, key=key
    )
    assert status == 400 and "messages[0].role" in json.loads(raw)["error"]["message"]
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": -3}
    status, raw = post(gw.url + "/v1/messages", body, key=key)
    assert status == 400 and "max_tokens" in json.loads(raw)["error"]["message"]
    status, _ = post(gw.url + "/v2/nothing", {}, key=key)
    assert status == 404
    assert model.requests == []  # nothing reached the model
    errors = [r for r in gw.exchanges.snapshot() if r["kind"] == "error"]
    assert [r["status"] for r in errors] == [400, 400, 400, 400, 404]


def test_model_failure_is_a_500_that_clients_must_not_retry(tmp_path):
    def broken(request):
        raise RuntimeError("backend down")

    with Gateway(ScriptedModel(broken, name="scripted/broken")) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=3)
        with pytest.raises(anthropic.InternalServerError, match="backend down"):
            client.messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        records = gw.exchanges.snapshot()
    assert len(records) == 1  # x-should-retry: false, so the SDK did not retry
    assert records[0]["status"] == 500 and "backend down" in records[0]["error"]


def test_exchanges_are_recorded_redacted_with_usage(tmp_path):
    log = tmp_path / "gw.jsonl"
    secret = "sk-ant-api03-" + "A" * 40
    with Gateway(ScriptedModel(two_step, name="scripted/gw"), record_path=log) as gw:
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0)
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"key {secret}"}]
        )
        assert gw.exchanges.usage().input_tokens == 31
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["usage"]["input_tokens"] == 31
    assert lines[0]["api"] == "chat" and lines[0]["usage_source"] == "model"
    assert secret not in log.read_text()
    assert "[REDACTED]" in lines[0]["request"]["messages"][0]["content"]


def test_model_without_native_tools_answers_with_tool_calls():
    def json_actions(request: ModelRequest) -> dict[str, Any]:
        assert request.json_schema is not None  # asked for one constrained JSON action
        names = {
            option["properties"].get("tool", {}).get("const")
            for option in request.json_schema["anyOf"]
        }
        assert "read_file" in names
        if any(m.role == "tool" for m in request.messages):
            return {"text": '{"answer": "done"}'}
        return {"text": '{"tool": "read_file", "args": {"path": "b.txt"}}'}

    model = ScriptedModel(json_actions, name="scripted/plain", native_tools=False)
    with Gateway(model) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
        first = client.messages.create(
            model="m",
            max_tokens=50,
            messages=[{"role": "user", "content": "go"}],
            tools=anthropic_tools(),
        )
        assert first.content[0].type == "tool_use" and first.content[0].input == {"path": "b.txt"}
        messages = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [first.content[0].model_dump()]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": first.content[0].id, "content": "ok"}
                ],
            },
        ]
        second = client.messages.create(
            model="m", max_tokens=50, messages=messages, tools=anthropic_tools()
        )
        assert second.content[0].text == "done"
        # no usage from the model: the gateway counted it, and says so
        record = gw.exchanges.snapshot()[0]
        assert record["usage_source"] == "estimate" and record["usage"]["input_tokens"] > 0
        assert first.usage.input_tokens == record["usage"]["input_tokens"]


@pytest.mark.local_model
def test_requests_larger_than_a_local_window_are_cut_to_fit():
    """An agent CLI's prompt is far larger than SmolLM2's window: the gateway cuts system text,
    then the oldest turns, keeping the first user message and the latest turns."""
    from metaeval.gateway.actions import _sent_tokens, fit_to_context
    from metaeval.models.local import find_smollm2_gguf
    from metaeval.models.registry import get_model
    from metaeval.models.types import Message

    if find_smollm2_gguf() is None:
        pytest.skip("SmolLM2 GGUF missing")
    model = get_model("local/smollm2", n_ctx=1024)
    messages = [
        Message(role="system", content="Rules. " * 3000),
        Message(role="user", content="TASK-1"),
    ]
    for i in range(30):
        messages.append(Message(role="assistant", content=f"step {i} " * 20))
        messages.append(Message(role="user", content=f"output {i} " * 20))
    request = ModelRequest(model="local/smollm2", messages=messages, max_tokens=200)
    fitted, note = fit_to_context(model, request, extra_tokens=50)
    limit = 1024 - 200 - 50 - 64
    assert note["window"] == 1024 and note["tokens_before"] > 5000
    assert note["tokens_after"] == _sent_tokens(model, fitted.messages) <= limit
    kept = fitted.messages
    assert kept[0].role == "system" and kept[0].content.startswith("Rules.")
    assert kept[1].content == "TASK-1"  # the task stays
    assert kept[-2:] == messages[-2:]  # the latest turn stays whole
    small = ModelRequest(model="local/smollm2", messages=messages[1:3], max_tokens=50)
    assert fit_to_context(model, small) == (small, None)  # fits: untouched


def test_serve_command_runs_until_sigterm_and_refuses_bad_input(tmp_path):
    import re
    import signal
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "metaeval.cli", "serve"]
    bad = subprocess.run([*cmd, "nope/x"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown model provider 'nope'" in bad.stderr
    assert "Traceback" not in bad.stderr
    wide = subprocess.run(
        [*cmd, "scripted/x", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=120
    )
    assert wide.returncode == 2 and "field 'host'" in wide.stderr and "loopback" in wide.stderr
    short = subprocess.run(
        [*cmd, "scripted/x"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "METAEVAL_GATEWAY_TOKEN": "short"},
    )
    assert short.returncode == 2 and "METAEVAL_GATEWAY_TOKEN" in short.stderr
    log = tmp_path / "gw.jsonl"
    proc = subprocess.Popen(  # no --port: a free one, printed
        [*cmd, "scripted/x", "--record", str(log)], stdout=subprocess.PIPE, text=True
    )
    try:
        first = proc.stdout.readline()
        url = re.search(r"at (http://127\.0\.0\.1:(\d+))", first).group(1)
        assert not url.endswith(":0") and not url.endswith(":8765")
        token = re.search(r"token: +(mgw-[\w-]{40,})", proc.stdout.readline()).group(1)
        claude = proc.stdout.readline()
        assert f"ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY={token}" in claude
        health = json.loads(urllib.request.urlopen(url + "/", timeout=10).read())
        assert health == {"status": "ok", "model": "scripted/x"}
        hi = {"messages": [{"role": "user", "content": "hi"}]}
        assert post(url + "/v1/chat/completions", hi)[0] == 401
        status, _ = post(url + "/v1/chat/completions", hi, key=token)
        assert status == 500  # a scripted model without responses: the error reaches the client
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["status"] for r in records] == [500] and "ran out of responses" in records[0]["error"]
