"""Content-addressed blob store: ``<root>/<hex[:2]>/<hex>``, referenced as ``sha256:<hex>``."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

from metaeval.errors import RecordIntegrityError, with_filename
from metaeval.records.durable import atomic_write, fsync_dir
from metaeval.records.nofollow import open_file
from metaeval.records.redact import redact_bytes

_REF_RE = re.compile(r"^sha256:([0-9a-f]{64})$")
_HASH_CHUNK = 1 << 20


def _utf8_head(data: bytes, n: int) -> bytes:
    """The longest prefix of at most n bytes that ends on a UTF-8 character boundary."""
    n = max(0, min(n, len(data)))
    while 0 < n < len(data) and (data[n] & 0xC0) == 0x80:
        n -= 1
    return data[:n]


def _utf8_tail(data: bytes, n: int) -> bytes:
    """The longest suffix of at most n bytes that starts on a UTF-8 character boundary."""
    n = max(0, min(n, len(data)))
    start = len(data) - n
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


def omission_marker(omitted: int, ref: str) -> str:
    """The marker put between head and tail of a shortened text."""
    return f"\n[... {omitted} bytes omitted; full text in blob {ref} ...]\n"


class BlobStore:
    """Immutable blobs under `root` (a run's ``blobs/`` directory).

    Content is scrubbed with `redact_bytes` before hashing unless ``scrub=False``,
    so a ref always names exactly the bytes on disk.

    `put(..., defer_sync=True)` writes the blob without waiting for the disk; `sync_pending`
    makes every such blob durable. A run's record writer calls it before each group of
    records it commits, so a record never becomes durable before a blob it names, and the
    writing job does not wait for two fsyncs per blob.
    """

    def __init__(self, root: str | os.PathLike[str], *, scrub: bool = True):
        self.root = Path(root)
        self._scrub = scrub
        self._pending: set[Path] = set()
        self._pending_lock = threading.Lock()

    def path_for(self, ref: str) -> Path:
        """Filesystem path of a blob ref (which need not exist)."""
        m = _REF_RE.match(ref)
        if not m:
            raise ValueError(f"not a blob ref: {ref!r} (expected 'sha256:<64 hex digits>')")
        hexd = m.group(1)
        return self.root / hexd[:2] / hexd

    def put(self, data: bytes | str, *, defer_sync: bool = False) -> str:
        """Store data (str is UTF-8 encoded) atomically; returns its ref. Idempotent.

        With `defer_sync` the blob is durable only after the next `sync_pending`."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if self._scrub:
            raw = redact_bytes(raw)
        ref = "sha256:" + hashlib.sha256(raw).hexdigest()
        final = self.path_for(ref)
        try:
            st = final.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_size == len(raw):  # a crash may leave a
                return ref  # short, unsynced copy; a link is refused by atomic_write
        except FileNotFoundError:
            pass
        # `blobs/` and its shard directories are walked without following links
        atomic_write(final, raw, sync=not defer_sync, root=self.root.parent, mkdir=True)
        if not defer_sync:
            return ref
        with self._pending_lock:
            self._pending.add(final)
        return ref

    def sync_pending(self) -> int:
        """fsync every blob written with `defer_sync` since the last call, and the
        directories naming them; returns how many blobs were synced."""
        with self._pending_lock:
            pending, self._pending = self._pending, set()
        if not pending:
            return 0
        try:
            for path in pending:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                except OSError as exc:
                    raise with_filename(exc, path) from exc
                finally:
                    os.close(fd)
        except BaseException:
            with self._pending_lock:
                self._pending |= pending  # still owed: the next commit tries again
            raise
        for directory in {path.parent for path in pending}:
            fsync_dir(directory)
        fsync_dir(self.root)  # a new shard directory's own entry
        return len(pending)

    def get(self, ref: str) -> bytes:
        """The bytes of a blob; RecordIntegrityError if it is missing or does not match its
        hash, ConfigError if a link or special file stands in its place (see `head`)."""
        return self.head(ref, None)[0]

    def head(self, ref: str, max_bytes: int | None) -> tuple[bytes, bool]:
        """(the first `max_bytes` bytes of a blob, or all with None; whether it holds more).

        `blobs/`, its shard directory and the blob are opened without following a link (a
        shared run may point them anywhere) and the whole blob is hashed whatever is kept,
        so a corrupt blob is never returned: RecordIntegrityError when it is missing or its
        hash differs, ConfigError (`nofollow.refused`) for a link or special file."""
        path = self.path_for(ref)
        try:
            fd = open_file(path, os.O_RDONLY, root=self.root.parent)
        except FileNotFoundError:
            raise RecordIntegrityError(f"blob {ref} is missing ({path})") from None
        os.set_blocking(fd, True)
        digest, kept, size = hashlib.sha256(), bytearray(), 0
        with os.fdopen(fd, "rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                if max_bytes is None or len(kept) < max_bytes:
                    kept += chunk if max_bytes is None else chunk[: max_bytes - len(kept)]
        if "sha256:" + digest.hexdigest() != ref:
            raise RecordIntegrityError(f"blob {ref} is corrupt: its content hash differs ({path})")
        return bytes(kept), size > len(kept)

    def __contains__(self, ref: object) -> bool:
        if not isinstance(ref, str) or _REF_RE.match(ref) is None:
            return False
        return self.path_for(ref).exists()

    def shorten(self, text: str, limit_bytes: int) -> dict[str, Any]:
        """Fit text into limit_bytes (UTF-8) without losing anything.

        Returns ``{"text", "raw_bytes", "delivered_bytes", "blob"}``. Text within the
        limit is returned unchanged with ``blob=None``. Longer text is stored whole as a
        blob and the view keeps its head and tail around `omission_marker`, which says
        how many bytes were left out and names the blob. The view fits the limit
        unless the limit is smaller than the marker itself. The text is scrubbed of
        secrets first (when the store scrubs), and all sizes describe the scrubbed text.
        """
        if limit_bytes < 0:
            raise ValueError("limit_bytes must be >= 0")
        if self._scrub:
            text = redact_bytes(text.encode("utf-8")).decode("utf-8")
        data = text.encode("utf-8")
        raw = len(data)
        if raw <= limit_bytes:
            return {"text": text, "raw_bytes": raw, "delivered_bytes": raw, "blob": None}
        ref = self.put(data)
        budget = limit_bytes - len(omission_marker(raw, ref).encode("utf-8"))
        while True:
            keep = max(0, budget)
            head = _utf8_head(data, keep - keep // 2)
            tail = _utf8_tail(data, keep // 2)
            marker = omission_marker(raw - len(head) - len(tail), ref).encode("utf-8")
            view = head + marker + tail
            if len(view) <= limit_bytes or keep == 0:
                break
            budget -= len(view) - limit_bytes
        return {
            "text": view.decode("utf-8"),
            "raw_bytes": raw,
            "delivered_bytes": len(view),
            "blob": ref,
        }
