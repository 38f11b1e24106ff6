"""An F16 copy of a quantized GGUF model, made once and cached, for prompt-bound work.

On CPUs llama.cpp has fast batched matrix kernels for F16 (and a few quantizations) but not
for every quantization: SmolLM2's Q4_1 file evaluates prompts at about 230 tokens/s on this
2-core machine where the same weights in F16 run at about 375 (generation drops from about 95
to 81 tokens/s: F16 moves more bytes per token). An audit is prompt-bound (3,400-token
prompts, a few generated tokens), so `local/...` models smaller than `F16_MAX_SOURCE_BYTES`
run from an F16 copy unless `-M weights=file` asks for the file as it is.

The copy is made with llama.cpp's own converter (`llama_model_quantize`, F16 output): every
weight is dequantized from the file's blocks and stored as a half-precision number, so the
model computes with the file's values (to F16 rounding), not with re-fitted ones. Copies live
under $METAEVAL_MODEL_CACHE (default ~/.cache/metaeval/gguf), named by the source file's
sha256 and the llama.cpp version, written to a temporary name and renamed into place.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import struct
import tempfile
import threading
from pathlib import Path
from typing import Any, Literal

from metaeval.errors import ConfigError

Weights = Literal["auto", "file", "f16"]
WEIGHTS = ("auto", "file", "f16")
# Above this the F16 copy (about 2.8x a 4-bit file) costs more memory than it is worth.
F16_MAX_SOURCE_BYTES = 1 << 30

_lock = threading.Lock()

# llama.cpp's general.file_type codes of unquantized files: nothing to gain from a copy
FLOAT_TYPES = (0, 1, 32)  # ALL_F32, MOSTLY_F16, MOSTLY_BF16
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}  # fmt: skip
_STRING, _ARRAY = 8, 9


def cache_root() -> Path:
    """Where converted copies are kept."""
    configured = os.environ.get("METAEVAL_MODEL_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "metaeval" / "gguf"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def wants_f16(path: Path, weights: Weights) -> bool:
    """Whether `weights` (auto, file, f16) runs `path` from an F16 copy."""
    if weights not in WEIGHTS:
        raise ConfigError(f"must be one of {', '.join(WEIGHTS)}, got {weights!r}", field="weights")
    if weights == "file":
        return False
    if weights == "f16":
        return True
    return path.stat().st_size <= F16_MAX_SOURCE_BYTES and gguf_file_type(path) not in FLOAT_TYPES


def f16_copy(path: Path, llama_cpp: Any) -> Path:
    """The cached F16 copy of `path`, made now when missing."""
    version = getattr(llama_cpp, "__version__", "unknown")
    target = cache_root() / f"{file_sha256(path)[:32]}-llamacpp{version}-f16.gguf"
    with _lock:
        if target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".gguf", dir=target.parent)
        os.close(fd)
        try:
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_F16
            params.allow_requantize = True
            params.nthread = max(1, len(os.sched_getaffinity(0)))
            with _quiet(llama_cpp):  # the converter logs every tensor to stderr
                status = llama_cpp.llama_model_quantize(
                    str(path).encode(), tmp.encode(), ctypes.byref(params)
                )
            if status != 0:
                raise ConfigError(
                    f"llama.cpp could not convert the model to F16 (status {status}); "
                    "use -M weights=file",
                    file=str(path),
                )
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return target


def _quiet(llama_cpp: Any) -> Any:
    """llama-cpp-python's own redirection of the C library's stdout/stderr, if it has one."""
    suppress = getattr(getattr(llama_cpp, "_utils", None), "suppress_stdout_stderr", None)
    return suppress(disable=False) if suppress is not None else contextlib.nullcontext()


def gguf_file_type(path: Path) -> int | None:
    """`general.file_type` from a GGUF header (llama.cpp's LLAMA_FTYPE code), None when the
    file does not say or cannot be read as GGUF."""
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != b"GGUF":
                return None
            _version, _tensors, count = struct.unpack("<IQQ", handle.read(20))
            for _ in range(min(count, 4096)):
                key = _read_string(handle)
                kind = struct.unpack("<I", handle.read(4))[0]
                value = _read_value(handle, kind)
                if key == "general.file_type":
                    return int(value) if isinstance(value, int) else None
    except (OSError, struct.error, ValueError, UnicodeDecodeError):
        return None
    return None


def _read_string(handle: Any) -> str:
    (length,) = struct.unpack("<Q", handle.read(8))
    if length > 1 << 20:
        raise ValueError("GGUF string too long")
    return handle.read(length).decode("utf-8")


def _read_value(handle: Any, kind: int) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, handle.read(struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _read_string(handle)
    if kind == _ARRAY:
        item_kind, length = struct.unpack("<IQ", handle.read(12))
        if item_kind in _SCALARS:  # skipped, not decoded
            handle.seek(struct.calcsize(_SCALARS[item_kind]) * length, os.SEEK_CUR)
        else:
            for _ in range(length):
                _read_value(handle, item_kind)
        return None
    raise ValueError(f"unknown GGUF value type {kind}")
