"""The built-in toolloop agent, driven by scripted models in native-tool and JSON-action modes."""

import json
import time
from pathlib import Path

import pytest

from metaeval.agents.toolloop import ToolLoopAgent
from metaeval.agents.types import Limits, Task
from metaeval.models.scripted import ScriptedModel
from metaeval.sandbox.workspace import Workspace


def call(name: str, args: dict, id: str) -> dict:
    return {
        "tool_calls": [
            {
                "id": id,
                "name": name,
                "arguments": args,
                "arguments_json": json.dumps(args, separators=(",", ":")),
            }
        ]
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("alpha\nbeta\ngamma\n")  # 6 + 5 + 6 = 17 bytes
    (src / "pkg").mkdir()
    (src / "pkg" / "mod.py").write_text("MAX = 3\n")
    return src


def test_native_tools_read_then_submit(repo, tmp_path):
    model = ScriptedModel(
        [
            call("read_file", {"path": "a.txt"}, "c1"),
            call("read_file", {"path": "a.txt", "offset": 2}, "c2"),
            call("submit", {"answer": "B"}, "c3"),
        ]
    )
    ws = Workspace.read_only_clone(repo, tmp_path / "ws")
    result = ToolLoopAgent(model).run(Task(id="t", instruction="q"), ws, Limits())
    assert (result.status, result.stop_reason, result.submission) == ("ok", "submitted", "B")
    assert result.steps == 3
    kinds = [e.kind for e in result.transcript if e.type == "tool_call"]
    assert kinds == ["read", "read", "submit"]
    # retrieval: the whole file once (17); the re-read of lines 2-3 adds nothing; "submitted\n" 10
    assert result.effort.novel_retrieval_bytes == 17 + 10
    # tool-call bytes: {"path":"a.txt"} 16 + {"path":"a.txt","offset":2} 27; submit excluded
    assert result.effort.novel_tool_call_bytes == 16 + 27
    # the model saw the tool results as tool messages answering the right call
    last = model.requests[-1].messages
    assert last[-1].role == "tool" and last[-1].tool_call_id == "c2"
    assert last[-1].content == "beta\ngamma\n"


def test_json_action_mode_constrains_each_step(repo, tmp_path):
    model = ScriptedModel(
        [
            '{"tool": "grep", "args": {"pattern": "MAX"}}',
            "not json",
            '{"tool": "submit", "args": {"answer": "C"}}',
        ],
        native_tools=False,
    )
    ws = Workspace.read_only_clone(repo, tmp_path / "ws")
    task = Task(id="t", instruction="q", metadata={"answer_schema": {"enum": ["A", "B", "C", "D"]}})
    result = ToolLoopAgent(model).run(task, ws, Limits())
    assert result.status == "ok" and result.submission == "C"
    first = model.requests[0]
    assert first.tools == [] and first.json_schema is not None
    submit_branch = [
        b for b in first.json_schema["anyOf"] if b["properties"]["tool"]["const"] == "submit"
    ]
    assert submit_branch[0]["properties"]["args"]["properties"]["answer"] == {
        "enum": ["A", "B", "C", "D"]
    }
    assert "write_file" not in json.dumps(first.json_schema)
    grep_result = next(e for e in result.transcript if e.type == "tool_result")
    assert grep_result.text == "pkg/mod.py:1:MAX = 3\n"
    assert any(e.type == "error" and "unparsable" in e.text for e in result.transcript)


def test_step_limit_ends_with_timeout_status(repo, tmp_path):
    model = ScriptedModel(lambda req: ModelResultLike.list_dir(len(model.requests)))
    ws = Workspace.read_only_clone(repo, tmp_path / "ws")
    result = ToolLoopAgent(model).run(Task(id="t", instruction="q"), ws, Limits(max_steps=4))
    assert (result.status, result.stop_reason, result.steps) == ("timeout", "step_limit", 4)
    assert len(model.requests) == 4


class ModelResultLike:
    @staticmethod
    def list_dir(n: int):
        from metaeval.models.types import ModelResult, ToolCall

        return ModelResult(
            model="scripted/x",
            tool_calls=[ToolCall(id=f"c{n}", name="list_dir", arguments={"path": "."})],
        )


def test_time_limit_ends_the_run(repo, tmp_path):
    def slow(req):
        time.sleep(0.3)
        return ModelResultLike.list_dir(len(req.messages))

    ws = Workspace.read_only_clone(repo, tmp_path / "ws")
    started = time.monotonic()
    result = ToolLoopAgent(ScriptedModel(slow)).run(
        Task(id="t", instruction="q"), ws, Limits(max_steps=100, time_limit_s=1.0)
    )
    assert (result.status, result.stop_reason) == ("timeout", "time_limit")
    assert time.monotonic() - started < 3


def test_provider_failure_is_an_infrastructure_error(repo, tmp_path):
    from metaeval.models.retry import ModelCallError

    def down(req):
        raise ModelCallError("transient", 5, ConnectionError("provider unreachable"))

    ws = Workspace.read_only_clone(repo, tmp_path / "ws")
    result = ToolLoopAgent(ScriptedModel(down)).run(Task(id="t", instruction="q"), ws, Limits())
    assert (result.status, result.infra_error) == ("error", True)
    assert "unreachable" in result.error


def test_rejected_request_is_a_final_error_not_infrastructure(repo, tmp_path):
    """A request the provider rejects (fatal, e.g. HTTP 400) fails the same way on a retry."""
    from metaeval.models.retry import ModelCallError

    def rejects(req):
        raise ModelCallError("fatal", 1, ValueError("400 invalid request: bad schema"))

    ws = Workspace.read_only_clone(repo, tmp_path / "ws")
    result = ToolLoopAgent(ScriptedModel(rejects)).run(Task(id="t", instruction="q"), ws, Limits())
    assert (result.status, result.infra_error) == ("error", False)
    assert "400" in result.error


def test_write_file_only_when_the_task_allows_it(tmp_path, repo):
    script = [
        call("write_file", {"path": "out.txt", "content": "hi"}, "w1"),
        call("submit", {"answer": "done"}, "s"),
    ]
    ws = Workspace.create(tmp_path / "ro-task", seed_from=repo)
    denied = ToolLoopAgent(ScriptedModel(list(script))).run(
        Task(id="t", instruction="q"), ws, Limits()
    )
    assert not (ws.path / "out.txt").exists() and denied.files_produced == []
    assert "unknown tool: write_file" in next(
        e.text for e in denied.transcript if e.type == "tool_result"
    )

    ws2 = Workspace.create(tmp_path / "rw-task", seed_from=repo)
    allowed = ToolLoopAgent(ScriptedModel(list(script))).run(
        Task(id="t", instruction="q", allow_write=True), ws2, Limits()
    )
    assert (ws2.path / "out.txt").read_text() == "hi"
    assert allowed.files_produced == ["out.txt"]


def test_long_tool_output_is_shortened_with_raw_size_recorded(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.txt").write_text("".join(f"line {i:04d}\n" for i in range(300)))  # 300 x 10 bytes
    model = ScriptedModel(
        [call("read_file", {"path": "big.txt"}, "r"), call("submit", {"answer": "x"}, "s")]
    )
    ws = Workspace.read_only_clone(src, tmp_path / "ws")
    result = ToolLoopAgent(model).run(
        Task(id="t", instruction="q"), ws, Limits(max_tool_output_bytes=95)
    )
    read = next(e for e in result.transcript if e.type == "tool_result")
    assert read.raw_bytes == 3000
    assert read.text == "".join(f"line {i:04d}\n" for i in range(9))  # 9 whole lines = 90 bytes


def test_shortened_read_tells_the_model_where_to_continue(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.txt").write_text("".join(f"line {i:04d}\n" for i in range(300)))
    model = ScriptedModel(
        [call("read_file", {"path": "big.txt"}, "r"), call("submit", {"answer": "x"}, "s")]
    )
    ws = Workspace.read_only_clone(src, tmp_path / "ws")
    ToolLoopAgent(model).run(Task(id="t", instruction="q"), ws, Limits(max_tool_output_bytes=95))
    seen = model.requests[1].messages[-1].content
    assert seen.endswith("[file has 300 lines; shown 1-9; use offset]\n")


def test_repeated_action_is_pointed_out_and_last_json_step_must_submit(repo, tmp_path):
    same = '{"tool": "list_dir", "args": {"path": "."}}'
    model = ScriptedModel(
        [same, same, '{"tool": "submit", "args": {"answer": "A"}}'], native_tools=False
    )
    ws = Workspace.read_only_clone(repo, tmp_path / "ws")
    result = ToolLoopAgent(model).run(Task(id="t", instruction="q"), ws, Limits(max_steps=3))
    second_result = model.requests[2].messages[-2].content
    assert second_result.endswith(
        "[you repeated your previous action; choose a different one or submit]\n"
    )
    assert "[you repeated" not in model.requests[1].messages[-1].content
    last_schema = model.requests[2].json_schema
    assert [b["properties"]["tool"]["const"] for b in last_schema["anyOf"]] == ["submit"]
    assert (
        model.requests[2].messages[-1].content == "This is your last step. Submit your answer now."
    )
    assert (result.status, result.stop_reason, result.submission) == ("ok", "forced_submit", "A")


def test_structured_submit_is_returned_as_json(repo, tmp_path):
    answer = {"q1": {"answer": "B", "evidence_files": ["a.txt"]}}
    model = ScriptedModel([call("submit", {"answer": answer}, "s")])
    ws = Workspace.read_only_clone(repo, tmp_path / "ws")
    result = ToolLoopAgent(model).run(Task(id="t", instruction="q"), ws, Limits())
    assert json.loads(result.submission) == answer


def test_a_stalled_model_server_ends_the_run_at_its_time_limit(repo, tmp_path):
    """The model server on 127.0.0.1 answers the first call and stalls on the second: the run
    returns at its 3-s limit (not when the stalled call would end, 30 s later) as a timeout,
    and records the limit and its wall clock."""
    import sys
    import threading

    from metaeval.models.registry import get_model

    sys.path.insert(0, str(Path(__file__).parent))
    from openai_stub import OpenAIStub

    release = threading.Event()
    answers = iter(['{"tool": "list_dir", "args": {"path": "."}}'])

    def reply(messages: list[dict]) -> str:
        answer = next(answers, None)
        if answer is None:
            release.wait(30)  # the stall
            return '{"tool": "submit", "args": {"answer": "late"}}'
        return answer

    with OpenAIStub(reply) as stub:
        model = get_model("openai/stub", base_url=stub.base_url, api_key="sk-test")
        agent = ToolLoopAgent(model)
        began = time.monotonic()
        result = agent.run(
            Task(id="stall", instruction="List the files, then submit."),
            Workspace(repo),
            Limits(max_steps=5, time_limit_s=3),
        )
        elapsed = time.monotonic() - began
        release.set()
        assert len(stub.chat_requests()) == 2  # the second call is the one that stalled
    assert result.status == "timeout" and result.stop_reason == "time_limit"
    assert result.error == "time limit of 3.0s reached (a model call still running was abandoned)"
    assert result.submission is None and result.steps == 2
    assert result.time_limit_s == 3
    assert 3 <= result.wall_clock_s <= elapsed < 3 + 1.0
    assert result.overrun_s is not None and result.overrun_s < 1.0
