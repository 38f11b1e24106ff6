"""The analysis tables as files: `write` writes every table with its documentation, `docs`
holds the title and column-by-column documentation of each whole-set table and `subset_docs`
of the question-subset views, and `files` writes frames as Parquet and CSV and reads CSV back.
"""
