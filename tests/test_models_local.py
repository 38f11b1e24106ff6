"""The real SmolLM2 GGUF, run in-process through llama-cpp-python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.models.registry import get_model
from metaeval.models.types import Message, ModelRequest, ToolSpec

pytestmark = pytest.mark.local_model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"enum": ["A", "B", "C", "D"]}},
    "required": ["answer"],
}


@pytest.fixture(scope="module")
def smollm2():
    model = get_model("local/smollm2")
    assert model is get_model("local/smollm2")  # loaded once per process
    return model


def test_chat_prompt_gives_text_and_usage(smollm2) -> None:
    result = smollm2.complete(
        ModelRequest(
            model="local/smollm2",
            messages=[
                Message(role="system", content="You are a helpful assistant."),
                Message(role="user", content="Name one primary colour."),
            ],
            max_tokens=32,
        )
    )
    assert result.text.strip()
    assert result.usage.input_tokens > 0
    assert 0 < result.usage.output_tokens <= 32
    assert result.model == "local/smollm2"
    assert result.cost_usd == 0.0
    assert result.latency_s > 0
    assert result.raw_response["usage"]["completion_tokens"] == result.usage.output_tokens
    assert smollm2.supports_native_tools() is False


def test_json_schema_output_parses_and_is_an_allowed_answer(smollm2) -> None:
    tool = ToolSpec(name="read_file", description="Read a file", parameters={"type": "object"})
    result = smollm2.complete(
        ModelRequest(
            model="local/smollm2",
            messages=[
                Message(
                    role="user",
                    content="Which planet is largest? A) Mars B) Jupiter C) Venus D) Earth. "
                    'Reply as JSON like {"answer": "B"}.',
                )
            ],
            json_schema=ANSWER_SCHEMA,
            tools=[tool],  # ignored by local models, but kept in raw_request
            max_tokens=48,
        )
    )
    parsed = json.loads(result.text)
    assert parsed["answer"] in {"A", "B", "C", "D"}
    assert result.raw_request["response_format"] == {"type": "json_object", "schema": ANSWER_SCHEMA}
    assert result.raw_request["tools"][0]["name"] == "read_file"


def test_same_seed_same_output(smollm2) -> None:
    request = ModelRequest(
        model="local/smollm2",
        messages=[Message(role="user", content="Write a word.")],
        temperature=0.8,
        seed=11,
        max_tokens=16,
    )
    assert smollm2.complete(request).text == smollm2.complete(request).text


def test_missing_gguf_is_config_error_naming_path() -> None:
    with pytest.raises(ConfigError, match=r"\./missing\.gguf"):
        get_model("local/./missing.gguf")


def test_any_gguf_path_loads(smollm2) -> None:
    path = Path(smollm2.source_path)  # the GGUF file itself (smollm2.path may be its F16 copy)
    model = get_model(f"local/{path}")
    assert model.source_path == path
    result = model.complete(
        ModelRequest(model="x", messages=[Message(role="user", content="Hi")], max_tokens=8)
    )
    assert result.model == f"local/{path}"
    assert result.usage.output_tokens > 0


def test_unknown_local_name() -> None:
    with pytest.raises(ConfigError, match="local/smollm2 or local/PATH.gguf"):
        get_model("local/not-a-model")
