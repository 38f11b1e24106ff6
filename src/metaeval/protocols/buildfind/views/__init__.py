"""Restricted finder views, an ablation layer on top of a run: `specs` says which files of an
artifact a finder may see under each view, `evidence` turns the view-find records into view
rows and per-view tables, and `docs` documents those tables column by column.
"""
