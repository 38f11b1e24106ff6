"""Task sources: other benchmark formats written as Harbor tasks (Terminal-Bench 1, BFCL)."""
