"""Local models run from a cached F16 copy of their GGUF (weights=auto/f16) or the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.models.gguf_weights import F16_MAX_SOURCE_BYTES, gguf_file_type, wants_f16
from metaeval.models.local import LocalModel, find_smollm2_gguf
from metaeval.models.types import Message, ModelRequest

pytestmark = pytest.mark.local_model

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

MOSTLY_F16 = 1  # llama.cpp's general.file_type code (F16)


def _request() -> ModelRequest:
    return ModelRequest(
        model="local/smollm2",
        messages=[Message(role="user", content="Name one primary colour.")],
        max_tokens=8,
        temperature=0.0,
        seed=0,
    )


def test_auto_runs_a_cached_f16_copy_and_records_which_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("METAEVAL_MODEL_CACHE", str(tmp_path / "cache"))
    source = find_smollm2_gguf()
    assert source is not None
    model = LocalModel("local/smollm2", "smollm2")
    assert model.weights == "f16" and model.source_path == source
    assert model.path.parent == tmp_path / "cache" and model.path != source
    # the copy really is F16, and the file the package ships was not touched
    assert model.runtime().file_type == MOSTLY_F16
    assert model.path.stat().st_size > 2 * source.stat().st_size
    made = model.path.stat().st_mtime_ns
    again = LocalModel("local/smollm2", "smollm2", n_ctx=2048)  # another load, same copy
    assert again.path == model.path and again.path.stat().st_mtime_ns == made
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [model.path.name]  # no leftovers
    # an F16 file (here the copy itself) has nothing to gain from a copy: it runs as it is
    as_given = LocalModel("local/copy", str(model.path))
    assert as_given.weights == "file" and as_given.path == model.path
    result = model.complete(_request())
    assert result.raw_request["weights"] == "f16"
    assert result.raw_request["model_path"] == str(model.path)
    assert result.raw_request["source_model_path"] == str(source)


def test_weights_file_runs_the_file_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("METAEVAL_MODEL_CACHE", str(tmp_path / "cache"))
    model = LocalModel("local/smollm2", "smollm2", weights="file")
    assert model.path == find_smollm2_gguf() and model.weights == "file"
    assert model.runtime().file_type != MOSTLY_F16
    assert not (tmp_path / "cache").exists()
    assert model.complete(_request()).raw_request["weights"] == "file"


def test_bad_weights_value_and_big_files(tmp_path):
    with pytest.raises(ConfigError) as info:
        LocalModel("local/smollm2", "smollm2", weights="q2")
    assert info.value.field == "weights"
    big = tmp_path / "big.gguf"
    with open(big, "wb") as handle:
        handle.truncate(F16_MAX_SOURCE_BYTES + 1)  # sparse: no disk used
    assert not wants_f16(big, "auto") and wants_f16(big, "f16")
    assert wants_f16(find_smollm2_gguf(), "auto")


def test_a_file_llama_cpp_cannot_convert_is_a_clear_error_and_leaves_nothing(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("METAEVAL_MODEL_CACHE", str(cache))
    source = find_smollm2_gguf()
    broken = tmp_path / "broken.gguf"
    with open(source, "rb") as handle:
        broken.write_bytes(handle.read(1 << 20))  # a GGUF cut after its first MiB
    with pytest.raises(ConfigError) as info:
        LocalModel("local/broken", str(broken), weights="f16")
    assert info.value.file == str(broken) and "weights=file" in str(info.value)
    assert not cache.exists() or os.listdir(cache) == []
    assert Path(source).stat().st_size > 1 << 20  # the source is untouched


def test_file_type_is_read_from_the_gguf_header(tmp_path):
    source = find_smollm2_gguf()
    assert gguf_file_type(source) == 3  # LLAMA_FTYPE_MOSTLY_Q4_1, as the file name says
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 not a model")
    assert gguf_file_type(not_gguf) is None
    cut = tmp_path / "cut.gguf"
    with open(source, "rb") as handle:
        cut.write_bytes(handle.read(40))  # the header stops inside its first key
    assert gguf_file_type(cut) is None
