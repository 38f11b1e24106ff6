"""The kinds of cell an audit run computes, one module each.

- `static`: the static source's cell of one task (static checks, execution checks, evidence),
  run in the engine's process lane when more than one job is in flight;
- `model`: one model's LLM-protocol audit of one task;
- `agent_run`: an agent's attempt at one task, for the execution tier (`AgentRuns`), leaving
  the task's agent-results folder (`agent_results`).

`dispatch` routes a (task, source) key of the run to its module and lane.
"""
