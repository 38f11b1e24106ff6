"""`metaeval view`: a local, read-only web viewer of run directories, bundles and releases.

- `discover`: find runs under the given paths (manifest.json of a known protocol);
- `runs`: read one run without opening it (no lock, no session entry, nothing written);
- `audit_pages`, `buildfind_pages`, `improve_pages`, `diff_pages`: what each page shows;
- `server`: the HTTP server (loopback by default; a token for any other host).
"""
