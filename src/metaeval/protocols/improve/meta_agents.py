"""Meta-agents: they change the target agent inside a trial's worktree.

Contract `edit/1`: the meta-agent edits the worktree and the harness takes the diff. Contract
`patch/1`: it returns a unified diff naming its parent, which the harness applies. Both end in
one candidate patch that is checked against the mutation boundary before anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from metaeval.agents.types import Limits, Task
from metaeval.errors import ConfigError
from metaeval.protocols.improve.records import MetaOutput
from metaeval.sandbox.workspace import Workspace

EditStep = Callable[[Path, dict[str, Any]], str]


class ScriptedMetaAgent:
    """Applies the i-th scripted edit (a function of the worktree and the contract input)."""

    contract = "edit/1"

    def __init__(self, steps: Sequence[EditStep], name: str = "scripted"):
        self.steps = list(steps)
        self.name = name

    def propose(self, contract_input: dict[str, Any], worktree: Path, limits: Limits) -> MetaOutput:
        index = int(contract_input["trial"]) - 1
        if index >= len(self.steps):
            return MetaOutput(status="error", error=f"no scripted step for trial {index + 1}")
        note = self.steps[index](worktree, contract_input)
        trace = [{"type": "scripted_edit", "step": index + 1, "note": note}]
        return MetaOutput(
            status="ok", summary=note, parent=contract_input["parent"]["id"], trace=trace
        )


class AgentMetaAgent:
    """Any metaeval agent (toolloop with write tools, or a CLI lane) editing the worktree."""

    contract = "edit/1"

    def __init__(self, agent: Any):
        self.agent = agent
        self.name = getattr(agent, "name", "agent")
        self.tool_menu: list[str] | None = None  # set by `apply_tool_menu`

    def propose(self, contract_input: dict[str, Any], worktree: Path, limits: Limits) -> MetaOutput:
        instruction = (worktree / ".aie_bench_recursive" / "optimizer_instruction.md").read_text()
        task = Task(
            id=f"trial-{contract_input['trial']}",
            instruction=instruction,
            allow_write=True,
            tools=self.tool_menu,
        )
        result = self.agent.run(task, Workspace(worktree), limits)
        trace = [json.loads(e.model_dump_json(exclude_none=True)) for e in result.transcript]
        return MetaOutput(
            status=result.status,
            summary=result.submission or "",
            parent=contract_input["parent"]["id"],
            error=result.error,
            usage=result.usage.model_dump(),
            cost_usd=result.cost_usd,
            trace=trace,
        )


def apply_tool_menu(meta_agent: Any, menu: Sequence[str], sut_config: str | None) -> None:
    """Restrict the meta-agent to the SUT config's `tool_menu` (empty: its full menu).

    The toolloop lane offers tools the harness controls; a CLI lane gets the menu through
    its own allow-list (`lane_tools`, refused where the CLI cannot enforce it); for any other
    lane (the scripted one) a non-empty menu is a ConfigError naming the field rather than a
    menu recorded and silently ignored. Unknown tool names are refused likewise."""
    if not menu:
        return
    from metaeval.agents.cli.base import CLIAdapter
    from metaeval.agents.toolloop import ToolLoopAgent
    from metaeval.agents.tools import TOOL_KINDS

    lane = getattr(meta_agent, "name", type(meta_agent).__name__)
    inner = getattr(meta_agent, "agent", None)
    if isinstance(inner, CLIAdapter):  # the CLI's own allow-list enforces it (`lane_tools`)
        from metaeval.protocols.improve.lane_tools import restrict_cli

        restrict_cli(inner, menu, sut_config)
        return
    if not isinstance(inner, ToolLoopAgent):
        raise ConfigError(
            f"the meta-agent lane '{lane}' cannot honour a tool menu (toolloop and the CLI "
            "lanes can); "
            "leave tool_menu empty for this lane",
            file=sut_config,
            field="tool_menu",
        )
    unknown = sorted(set(menu) - set(TOOL_KINDS))
    if unknown:
        raise ConfigError(
            f"unknown tool(s) {', '.join(unknown)} (toolloop offers {', '.join(TOOL_KINDS)})",
            file=sut_config,
            field="tool_menu",
        )
    meta_agent.tool_menu = list(menu)


def make_meta_agent(
    spec: dict[str, Any],
    scripted_steps: Sequence[EditStep] | None = None,
    launch_profile: Any = None,
):
    """The meta-agent of a SUT config's `meta_agent` section (the `pact` lane: the server
    its `launch_profile` describes)."""
    kind = spec.get("agent", "scripted")
    if kind == "pact":
        from metaeval.protocols.improve.pact.meta_agent import PactMetaAgent

        return PactMetaAgent(launch_profile)
    if kind == "scripted":
        if scripted_steps is None:
            from metaeval.protocols.improve.scripted_steps import demo_steps

            scripted_steps = demo_steps()
        return ScriptedMetaAgent(scripted_steps)
    from metaeval.agents.registry import get_agent

    return AgentMetaAgent(get_agent(kind, model=spec.get("model"), **(spec.get("options") or {})))
