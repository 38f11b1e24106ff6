"""What crosses between the Ray driver and a worker: the pickled job, the run it sees, its blobs.

On the driver, `pickle_job` pickles a job's callable with every `RunDir` replaced by a
`WorkerRun` (and every model by the same model made again on the worker). On the worker,
`run_payload` runs it under its timeout; its blobs are collected in memory, never written.
Back on the driver, `store_blobs` puts them into the run's real blob store.
"""

from __future__ import annotations

import io
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from metaeval.errors import MetaevalError
from metaeval.models.base import Model
from metaeval.records.blobs import BlobStore
from metaeval.records.redact import is_secret_field, redact_bytes
from metaeval.records.run import RunDir


class _CollectingBlobs:
    """Stands in for a BlobStore on a worker: `put` returns the ref the driver's store will
    use and keeps the bytes for the driver to write."""

    def __init__(self) -> None:
        self.collected: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes | str, *, defer_sync: bool = False) -> str:
        """The blob's ref; the driver writes (and syncs) it before the job's records."""
        import hashlib

        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        raw = redact_bytes(raw)
        ref = "sha256:" + hashlib.sha256(raw).hexdigest()
        with self._lock:
            self.collected[ref] = raw
        return ref


class WorkerRun:
    """What a job sees of its run directory on a worker: path, layer, a blob collector, and
    read-only access to records. It cannot write records (the driver is the only writer)."""

    def __init__(self, path: str, layer: str, layers: list[dict], manifest: dict[str, Any]):
        self.path = Path(path)
        self.layer = layer
        self.layers = layers
        self.manifest = manifest
        self.blobs = _CollectingBlobs()

    @property
    def base_layer(self) -> str:
        return self.layers[0]["name"] if self.layers else self.layer

    def read(self, name: str, *, layer: str | None = None, all_layers: bool = False) -> list[dict]:
        from metaeval.records.jsonl import iter_jsonl

        want = layer or self.layer
        return [
            rec
            for rec in iter_jsonl(self.path / f"{name}.jsonl", lambda _problem: None)
            if all_layers or rec.get("layer", self.base_layer) == want
        ]

    def records(self, name: str) -> Any:
        raise MetaevalError(f"a job on a Ray worker cannot write records ({name}.jsonl)")


_UNPICKLING_LOCK = threading.Lock()
_unpickled_runs: list[WorkerRun] = []


def _worker_run(path: str, layer: str, layers: list[dict], manifest: dict[str, Any]) -> WorkerRun:
    """Unpickling hook: a WorkerRun, remembered so the job's blobs can be gathered."""
    run = WorkerRun(path, layer, layers, manifest)
    _unpickled_runs.append(run)
    return run


def run_payload(payload: bytes, timeout_s: float | None) -> dict[str, Any]:
    """Worker entry point: unpickle the job, run it under its timeout, return its outcome."""
    import ray.cloudpickle as cloudpickle

    with _UNPICKLING_LOCK:
        _unpickled_runs.clear()
        fn = cloudpickle.loads(payload)
        collectors = [run.blobs for run in _unpickled_runs]
        _unpickled_runs.clear()
    box: dict[str, Any] = {}
    finished = threading.Event()
    started = time.monotonic()

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException:  # noqa: BLE001 - reported as a failed outcome
            box["error"] = traceback.format_exc()
        finally:
            finished.set()

    threading.Thread(target=body, name="metaeval-ray-job", daemon=True).start()
    if not finished.wait(timeout_s):
        return {
            "status": "timeout",
            "error": f"job exceeded {timeout_s}s (on worker {os.uname().nodename}:{os.getpid()})",
            "duration_s": float(timeout_s or 0),
            "blobs": {},
        }
    blobs: dict[str, bytes] = {}
    for collector in collectors:
        blobs.update(collector.collected)
    duration = time.monotonic() - started
    if "error" in box:
        return {"status": "failed", "error": box["error"], "duration_s": duration, "blobs": blobs}
    return {"status": "done", "value": box.get("value"), "duration_s": duration, "blobs": blobs}


def _worker_model(name: str, options: dict[str, Any]) -> Any:
    """Unpickling hook: the same model made on the worker (credentials from its environment)."""
    from metaeval.models.registry import get_model

    return get_model(name, **options)


def pickle_job(fn: Callable[[], Any]) -> tuple[bytes, list[RunDir]]:
    """Pickle a job's callable by value, every RunDir replaced by a WorkerRun; also return
    the RunDirs met (their blob stores receive the job's blobs)."""
    import ray.cloudpickle as cloudpickle

    met: list[RunDir] = []

    class JobPickler(cloudpickle.CloudPickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, RunDir):
                met.append(obj)
                return _worker_run, (str(obj.path), obj.layer, obj.layers, obj.manifest)
            if isinstance(obj, Model) and obj.spec is not None:
                name, options = obj.spec
                public = {k: v for k, v in options.items() if not is_secret_field(k)}
                return _worker_model, (name, public)
            return super().reducer_override(obj)

    buffer = io.BytesIO()
    JobPickler(buffer).dump(fn)
    return buffer.getvalue(), met


def store_blobs(blobs: Mapping[str, bytes], stores: Mapping[str, BlobStore], value: Any) -> Any:
    """Write a job's blobs into the driver's store; rewrite refs if the driver's redaction
    changed the bytes (it only ever removes secrets)."""
    if not stores:
        raise MetaevalError("a Ray job returned blobs but refers to no run directory")
    store = next(iter(stores.values()))
    renamed = {}
    for ref, data in blobs.items():
        new = store.put(data)
        if new != ref:
            renamed[ref] = new
    return _rename(value, renamed) if renamed else value


def _rename(value: Any, renamed: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return renamed.get(value, value)
    if isinstance(value, dict):
        return {k: _rename(v, renamed) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, renamed) for v in value]
    if isinstance(value, tuple):
        return tuple(_rename(v, renamed) for v in value)
    return value
