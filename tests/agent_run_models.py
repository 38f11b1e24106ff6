"""Scripted models for agent runs on the grade-mean task, registered as metaeval providers so an
agent spec names them (``claude-code:gwsolve/x``) and the protocol starts the gateway itself.

- ``gwsolve``: reads /app/grades.csv with Bash, writes /app/output.txt (what the tests check)
  and /app/result.json (what the instruction asks for), then says it is done;
- ``gwshell``: the same through Codex's shell tool (``exec_command``);
- ``gwflaky``: like ``gwsolve``, but every request fails while ``FLAKY["down"]`` is set (a
  provider outage: an infrastructure error);
- ``gwhang``: answers the title request, then never answers a tool request in time.
"""

from __future__ import annotations

import threading
from typing import Any

from metaeval.models.registry import register_provider
from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import ModelRequest

USAGE = {"input_tokens": 70, "output_tokens": 7}
MEAN = "72.5"
FINAL_TEXT = "Wrote the mean to /app/output.txt and /app/result.json."


def solve(request: ModelRequest) -> dict[str, Any]:
    if not request.tools:
        return {"text": "Mean grade", "usage": USAGE}
    done = sum(1 for m in request.messages if m.role == "tool")
    steps = [
        ("Bash", {"command": "cat /app/grades.csv", "description": "read the grades"}),
        ("Write", {"file_path": "/app/output.txt", "content": f"{MEAN}\n"}),
        ("Write", {"file_path": "/app/result.json", "content": '{"mean": 72.5}\n'}),
    ]
    if done >= len(steps):
        return {"text": FINAL_TEXT, "usage": USAGE}
    name, args = steps[done]
    return {"tool_calls": [{"id": f"s{done}", "name": name, "arguments": args}], "usage": USAGE}


def shell(request: ModelRequest) -> dict[str, Any]:
    if not request.tools:
        return {"text": "Mean grade", "usage": USAGE}
    done = sum(1 for m in request.messages if m.role == "tool")
    steps = ["cat /app/grades.csv", f"printf '{MEAN}\\n' > /app/output.txt"]
    if done >= len(steps):
        return {"text": FINAL_TEXT, "usage": USAGE}
    call = {"id": f"c{done}", "name": "exec_command", "arguments": {"cmd": steps[done]}}
    return {"tool_calls": [call], "usage": USAGE}


FLAKY = {"down": True}


def flaky(request: ModelRequest) -> dict[str, Any]:
    if FLAKY["down"]:
        raise RuntimeError("provider outage")
    return solve(request)


def hang(request: ModelRequest) -> dict[str, Any]:
    if not request.tools:
        return {"text": "Mean grade", "usage": USAGE}
    threading.Event().wait(40)  # longer than the agent's time limit
    return {"text": "too late", "usage": USAGE}


def register() -> None:
    register_provider(
        "gwsolve", lambda model_id, name, **o: ScriptedModel(solve, name=name), cacheable=False
    )
    register_provider(
        "gwshell", lambda model_id, name, **o: ScriptedModel(shell, name=name), cacheable=False
    )
    register_provider(
        "gwflaky", lambda model_id, name, **o: ScriptedModel(flaky, name=name), cacheable=False
    )
    register_provider(
        "gwhang", lambda model_id, name, **o: ScriptedModel(hang, name=name), cacheable=False
    )


register()
