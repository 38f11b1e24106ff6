"""Agent names -> agent instances: toolloop, scripted, the oracle and null reference agents
(`metaeval.agents.reference`), and the CLI adapters."""

from __future__ import annotations

from typing import Any

from metaeval.errors import ConfigError

BUILTIN_AGENTS = ("toolloop", "scripted", "oracle", "null")


def agent_names() -> list[str]:
    """Every registered agent name."""
    from metaeval.agents.cli import CLI_ADAPTERS

    return [*BUILTIN_AGENTS, *sorted(CLI_ADAPTERS)]


def get_agent(name: str, model: str | None = None, **options: Any):
    """Build the agent `name`, driven by `model` where the agent takes one.

    ``CLI:MODEL`` names a CLI agent and its model in one string, e.g.
    ``claude-code:local/smollm2`` (a metaeval model: served to the CLI through a gateway).
    """
    if ":" in name and model is None:
        head, tail = name.split(":", 1)
        from metaeval.agents.cli import CLI_ADAPTERS

        if head in CLI_ADAPTERS and tail:
            name, model = head, tail
    if name == "toolloop":
        from metaeval.agents.toolloop import ToolLoopAgent
        from metaeval.models.registry import DEFAULT_MODEL, get_model

        return ToolLoopAgent(get_model(model or DEFAULT_MODEL), **options)
    if name == "scripted":
        from metaeval.agents.scripted import ScriptedAgent

        return ScriptedAgent(options.pop("actions", []), **options)
    if name in ("oracle", "null"):
        from metaeval.agents.reference import null_agent, oracle_agent

        return oracle_agent() if name == "oracle" else null_agent()
    from metaeval.agents.cli import CLI_ADAPTERS

    if name in CLI_ADAPTERS:
        return CLI_ADAPTERS[name](model=model, **options)
    known = ", ".join(agent_names())
    raise ConfigError(f"unknown agent '{name}' (known: {known})", field="agent")
