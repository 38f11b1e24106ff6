"""One module per kind of build-and-find cell: `build`, `find`; `context` is what both read,
and `answer_json` finds a finder's answer object in what it submitted."""
