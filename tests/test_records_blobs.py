"""Content-addressed blobs and lossless shortening."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from metaeval.errors import ConfigError, RecordIntegrityError
from metaeval.records import BlobStore

# len("\n[... ") + len(" bytes omitted; full text in blob ") + len("sha256:" + 64 hex)
# + len(" ...]\n") = 6 + 34 + 71 + 6 = 117 bytes, plus the digits of the omitted count.
MARKER_FIXED = 117


def test_put_is_content_addressed_and_idempotent(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    ref = store.put("hello")
    hexd = hashlib.sha256(b"hello").hexdigest()
    assert ref == "sha256:" + hexd
    path = tmp_path / "blobs" / hexd[:2] / hexd
    assert path.read_bytes() == b"hello"
    mtime = path.stat().st_mtime_ns
    assert store.put(b"hello") == ref  # bytes and str agree; second put is a no-op
    assert path.stat().st_mtime_ns == mtime
    assert store.get(ref) == b"hello"
    assert ref in store
    # No temporary files are left behind.
    assert sorted(p.name for p in path.parent.iterdir()) == [hexd]


def test_get_detects_missing_and_corrupt_blobs(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    ref = store.put(b"\x00\x01binary")
    assert store.get(ref) == b"\x00\x01binary"
    store.path_for(ref).write_bytes(b"tampered")
    with pytest.raises(RecordIntegrityError, match="corrupt"):
        store.get(ref)
    with pytest.raises(RecordIntegrityError, match="missing"):
        store.get("sha256:" + "0" * 64)
    with pytest.raises(ValueError):
        store.get("md5:abc")


def test_shorten_within_limit_is_unchanged(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    out = store.shorten("héllo", 6)  # 6 bytes in UTF-8
    assert out == {"text": "héllo", "raw_bytes": 6, "delivered_bytes": 6, "blob": None}
    assert not any(tmp_path.rglob("*"))


def test_shorten_ascii_numbers_by_hand(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    out = store.shorten(text, 200)
    ref = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    # Marker sized for 1000 (4 digits): 121 bytes, leaving 79 for head (40) + tail (39).
    # The omitted count is then 1000 - 79 = 921 (3 digits): marker 120, view 79 + 120.
    assert out["raw_bytes"] == 1000
    assert out["delivered_bytes"] == 199
    assert out["blob"] == ref
    expected = text[:40] + f"\n[... 921 bytes omitted; full text in blob {ref} ...]\n" + text[-39:]
    assert len(expected.encode()) == 40 + MARKER_FIXED + 3 + 39 == 199
    assert out["text"] == expected
    assert store.get(ref) == text.encode()  # the blob holds the full text


def test_shorten_respects_utf8_boundaries(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    text = "€" * 200  # 3 bytes each: 600 bytes
    out = store.shorten(text, 200)
    # Marker for 600 (3 digits) is 120 bytes, leaving 80: head <= 40 and tail <= 40 bytes,
    # rounded down to whole characters: 13 euros (39 bytes) each; 600 - 78 = 522 omitted.
    ref = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert out["raw_bytes"] == 600
    assert out["delivered_bytes"] == 39 + MARKER_FIXED + 3 + 39 == 198
    assert (
        out["text"]
        == "€" * 13 + f"\n[... 522 bytes omitted; full text in blob {ref} ...]\n" + "€" * 13
    )
    assert store.get(out["blob"]).decode() == text


def test_shorten_limit_below_marker_still_says_what_is_missing(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    text = "z" * 500
    out = store.shorten(text, 10)
    ref = out["blob"]
    assert out["text"] == f"\n[... 500 bytes omitted; full text in blob {ref} ...]\n"
    assert out["delivered_bytes"] == MARKER_FIXED + 3
    assert store.get(ref) == text.encode()


def test_deferred_blobs_are_synced_before_the_records_that_name_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from metaeval.records import RunDir
    from metaeval.records import blobs as blobs_mod

    run = RunDir.open(tmp_path / "run", protocol="t", config={}, hashes={}, seeds={})
    synced: list[str] = []
    real_fsync = blobs_mod.os.fsync

    def spy(fd: int) -> None:
        synced.append(blobs_mod.os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(blobs_mod.os, "fsync", spy)
    ref = run.blobs.put("deferred evidence", defer_sync=True)
    path = str(run.blobs.path_for(ref))
    assert run.blobs.get(ref) == b"deferred evidence"  # readable at once
    assert path not in synced  # but not yet forced to disk
    run.submit([("cells", {"blob": ref})]).result(timeout=30)
    assert path in synced  # the writer synced it before the record naming it
    assert run.blobs.sync_pending() == 0  # nothing owed any more
    run.close()


def test_a_short_copy_left_by_a_crash_is_rewritten(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    ref = store.put(b"full content", defer_sync=True)
    store.path_for(ref).write_bytes(b"")  # what an unsynced file can look like after a crash
    assert store.put(b"full content") == ref
    assert store.get(ref) == b"full content"


def _blob_path(root: Path, data: bytes) -> tuple[str, Path]:
    digest = hashlib.sha256(data).hexdigest()
    return "sha256:" + digest, root / "blobs" / digest[:2] / digest


@pytest.mark.parametrize("where", ["blob", "shard", "blobs"])
def test_get_never_reads_through_a_link_even_to_the_right_bytes(tmp_path: Path, where: str) -> None:
    """A shared run may link a blob (or its folders) to a file elsewhere holding exactly the
    named bytes: the hash would match, the read is still refused, naming the link."""
    data = b"evidence someone else holds\n"
    ref, path = _blob_path(tmp_path / "run", data)
    elsewhere = tmp_path / "elsewhere" / "blobs" / path.parent.name
    elsewhere.mkdir(parents=True)
    (elsewhere / path.name).write_bytes(data)
    link = {"blob": path, "shard": path.parent, "blobs": path.parent.parent}[where]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(
        {"blob": elsewhere / path.name, "shard": elsewhere, "blobs": elsewhere.parent}[where]
    )
    store = BlobStore(tmp_path / "run" / "blobs")
    with pytest.raises(ConfigError, match="symbolic link") as caught:
        store.get(ref)
    assert str(link) in str(caught.value)


@pytest.mark.timeout(20)
def test_get_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    ref, path = _blob_path(tmp_path, b"x")
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with pytest.raises(ConfigError, match="not a regular file"):
        BlobStore(tmp_path / "blobs").get(ref)


def test_head_cuts_but_hashes_the_whole_blob(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    ref = store.put(b"0123456789")
    assert store.head(ref, 4) == (b"0123", True)
    assert store.head(ref, 10) == (b"0123456789", False)
    assert store.head(ref, None) == (b"0123456789", False)
    store.path_for(ref).write_bytes(b"0123XXXXXX")  # damaged after the part shown
    with pytest.raises(RecordIntegrityError, match="corrupt"):
        store.head(ref, 4)
