"""One module per kind of build-and-find cell: `build`, `find`; `context` is what both read."""
