"""Build and Find: builders implement a spec, finders answer questions about the artifact, and
the analysis measures what the questions recover. `cli`, `config`, `plan` and `run` drive a run
on the shared cell engine (`cells/`, `records`); `finalize` turns its records into rows
(`rows/`), labels, the analysis (`analysis/`), tables (`tables/`) and the report (`report/`);
`pack/` reads the task packs, `artifact/` checks what builders made, `views/` is the
restricted-view ablation and `release/` makes and verifies a self-verifying release.
"""
