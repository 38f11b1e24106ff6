"""The gateway's record of exchanges: one JSON line per request, written by a background
thread, with the usage each client ran up."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

from metaeval.models.types import ModelRequest, Usage


class ExchangeLog:
    """Every exchange, in memory and (when a path is given) appended to a redacted JSONL file.

    File writes happen on a background thread, so fsync never sits on a request's path.
    """

    def __init__(self, path: Path | None = None):
        self.path = path
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        if path is not None:
            from metaeval.records.jsonl import JsonlWriter

            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._writer = JsonlWriter(path)
            self._thread = threading.Thread(target=self._drain, name="gateway-log", daemon=True)
            self._thread.start()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            request = item.get("request")
            if isinstance(request, ModelRequest):
                item = {**item, "request": request.model_dump(mode="json", exclude_defaults=True)}
            self._writer.append(item)

    def begin(self, record: dict[str, Any]) -> None:
        """List a record now (it is filled in as the exchange goes on), so that whoever got
        the response can already find it."""
        with self._lock:
            record["seq"] = len(self.records) + 1
            self.records.append(record)

    def finish(self, record: dict[str, Any]) -> None:
        """The exchange is over: write its record to the file."""
        if self._thread is not None:
            self._queue.put(record)

    def add(self, record: dict[str, Any]) -> None:
        self.begin(record)
        self.finish(record)

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._writer.close()
            self._thread = None

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.records)

    def for_client(self, tag: str) -> list[dict[str, Any]]:
        """The records of one client (one run's socket)."""
        return [r for r in self.snapshot() if r.get("client") == tag]

    def usage(self, client: str | None = None) -> Usage:
        """Total usage the gateway reported over completions (of one client, if given)."""
        total = Usage()
        records = self.snapshot() if client is None else self.for_client(client)
        for record in records:
            if record.get("kind") == "completion" and record.get("usage"):
                total = total + Usage(**record["usage"])
        return total
