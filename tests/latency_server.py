"""Start bench/latency_server.py (a real process on 127.0.0.1) from tests."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from raw_http import started

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "latency_server.py"


class LatencyServer:
    """`with LatencyServer(latency=0.1) as server:`; `server.url` ends in /v1."""

    def __init__(self, latency: float, *extra: str):
        self.proc, port = started(SCRIPT, "--latency", str(latency), *extra)
        self.root = f"http://127.0.0.1:{port}"
        self.url = self.root + "/v1"

    def _call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.root + path, data=data, method="POST" if data else "GET"
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def stats(self) -> dict[str, Any]:
        return self._call("/stats")

    def set_capacity(self, capacity: int | None) -> None:
        self._call("/control", {"capacity": capacity})

    def __enter__(self) -> LatencyServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
