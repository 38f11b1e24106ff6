"""A release of a finished build-and-find run, and its check: `write` lays out the release
(records, blobs, tables, rows, labels, figures, SHA256SUMS) with its human-readable texts
(`texts`), every file passed through the secret and host-path scrubber (`scrub`) and described
by Croissant metadata (`croissant`); `verify` is `verify-release`, which recomputes everything
from the released records and rows and reports each difference: the tree and checksums
(`integrity`), the tables (`compare`, with the presentation layouts of earlier versions in
`earlier_layouts`), the artifact scans (`scans`), the seeds (`seeds`) and the Croissant file
(`croissant_check`).
"""
