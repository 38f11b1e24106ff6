"""The two reference agents of a Harbor trial, as scripted agents.

- `oracle`: runs the task's reference solution, `bash /solution/solve.sh`, with the whole
  time limit of the agent phase, then submits. It asks to see the solution
  (`sees_solution`), so a trial shows it /solution and task.toml's `[solution.env]`.
- `null`: submits at once, having done nothing (tests that pass for it pass without work).

Both take `(task, env, limits)` like any agent and run wherever one does; a trial that runs
them (`metaeval.tasks.trial.run_trial` with `metaeval.agents.in_trial.TrialAgent`) has no
path of its own for them.
"""

from __future__ import annotations

from metaeval.agents.scripted import ScriptedAgent

SOLVE_COMMAND = "bash /solution/solve.sh"
REFERENCE_AGENTS = ("oracle", "null")


def oracle_agent() -> ScriptedAgent:
    """The agent that runs the task's reference solution."""
    actions = [("bash", {"command": SOLVE_COMMAND}), ("submit", {"answer": ""})]
    return ScriptedAgent(actions, name="oracle", action_timeout_s=None, sees_solution=True)


def null_agent() -> ScriptedAgent:
    """The agent that does nothing."""
    return ScriptedAgent([("submit", {"answer": ""})], name="null")


def command_agent(command: str, name: str = "command") -> ScriptedAgent:
    """An agent that runs one shell command with the whole time limit, then submits (a probe
    of what the agent phase allows; it sees no solution)."""
    actions = [("bash", {"command": command}), ("submit", {"answer": ""})]
    return ScriptedAgent(actions, name=name, action_timeout_s=None)
