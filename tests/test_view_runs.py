"""The viewer reads blobs through `BlobStore.head`: a cut blob says so, and a corrupt blob or
a link standing in for one shows a reason, never the bytes."""

from __future__ import annotations

import os
from pathlib import Path

from metaeval.records import BlobStore, RunDir
from metaeval.view.runs import RunRecords


def test_blob_text_cut_corrupt_and_linked(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, protocol="audit", config={}, hashes={"b": "x"}, seeds={})
    ref = run.blobs.put("0123456789" * 10)
    run.close()
    store = BlobStore(tmp_path / "blobs")
    reader = RunRecords(tmp_path)
    assert reader.blob(ref) == ("0123456789" * 10, "")
    assert reader.blob(ref, max_bytes=15) == ("012345678901234", "only the first 15 bytes shown")
    assert reader.blob(None) == (None, "no blob recorded")
    path = store.path_for(ref)
    os.chmod(path, 0o644)
    path.write_text("0123456789" * 9 + "tampered!!")
    text, problem = reader.blob(ref)
    assert text is None and ref in problem
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-VIEW-BLOB")
    path.unlink()
    path.symlink_to(secret)
    text, problem = reader.blob(ref)
    assert text is None and "SECRET" not in problem and problem
    path.unlink()
    text, problem = reader.blob(ref)
    assert text is None and "missing" in problem
