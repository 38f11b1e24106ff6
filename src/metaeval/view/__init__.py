"""`metaeval view`: a local web viewer (it writes nothing but audit review sheets) of run directories, bundles and releases.

- `discover`: find runs under the given paths (manifest.json of a known protocol);
- `runs`: read one run without opening it (no lock, no session entry, nothing written);
- `audit_pages`, `buildfind_pages`, `improve_pages`, `diff_pages`: what each page shows;
- `server`: the HTTP server (loopback by default; a token for any other host).
"""
