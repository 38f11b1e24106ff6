"""Search policies of improve: which parent(s) each trial patches, and the final pick.

`recursive` is the paper's loop (Section 2.3): every trial patches the active parent.
`pareto` (GEPA-style) and `archive` (Darwin Goedel Machine-style) keep a population of valid
candidates and draw parents from it with a recorded seed, so a search replays. A proposal
may name a second parent (`merge`); the final pick among the population is made on held-out
scores the meta-agent never saw (`final_pick`). The contract, boundary, sealing and commit
rules of a trial are the same under every policy.
"""
