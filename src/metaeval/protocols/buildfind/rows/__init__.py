"""The canonical question-rows table every metric reads: `table` defines it (one row per slice,
build, find run and question, with its schema) and `extract` builds it from a run's build and
find records.
"""
