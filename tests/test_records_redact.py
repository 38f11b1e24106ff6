"""No secret reaches disk: redaction of records, manifest, blobs, summary."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from metaeval.records import REDACTED, RunDir, is_secret_field, redact, redact_argv, redact_text
from metaeval.records.redact import redact_bytes

SECRET = "supersecretvalue123"


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("FOO_API_KEY", SECRET)
    return SECRET


def _all_bytes(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_nothing_secret_on_disk_anywhere_in_the_run_dir(tmp_path: Path, secret_env: str) -> None:
    run_path = tmp_path / "run"
    run = RunDir.open(
        run_path,
        protocol="demo",
        config={"provider": {"api_key": SECRET, "base_url": "http://x"}, "note": f"k={SECRET}"},
        hashes={"prompt:system": "You are helpful."},
        seeds=[0],
        command=["metaeval", "run", "--api-key", SECRET, f"--note={SECRET}"],
    )
    with run:
        run.records("cells").append(
            {
                "task": "t1",
                "status": "ok",
                "messages": [{"role": "tool", "content": f"env says FOO_API_KEY={SECRET} ok"}],
                "deep": {"a": [{"b": f"prefix{SECRET}suffix"}]},
                "api_key": SECRET,
                "headers": {"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET},
                "input_tokens": 12,
            }
        )
        ref = run.blobs.put(f"transcript with {SECRET} inside")
        short = run.blobs.shorten(("log " + SECRET + " ") * 100, 200)
        run.records("cells").append({"task": "t2", "status": "ok", "blob": ref, "out": short})
        run.write_summary({"secret_note": SECRET, "nested": {"password": "hunter2hunter2"}})

    files = _all_bytes(run_path)
    assert any(p.name == "manifest.json" for p in files)
    assert any(p.parent.parent.name == "blobs" for p in files)
    leaks = [str(p) for p, data in files.items() if SECRET.encode() in data]
    assert leaks == []
    assert not any(b"hunter2hunter2" in data for data in files.values())

    cells = [json.loads(line) for line in (run_path / "cells.jsonl").read_text().splitlines()]
    first = cells[0]
    assert first["api_key"] == REDACTED
    assert first["headers"] == {"Authorization": REDACTED, "x-api-key": REDACTED}
    assert first["deep"] == {"a": [{"b": f"prefix{REDACTED}suffix"}]}
    assert first["input_tokens"] == 12
    manifest = json.loads((run_path / "manifest.json").read_text())
    assert manifest["config"]["provider"] == {"api_key": REDACTED, "base_url": "http://x"}
    assert manifest["command"] == ["metaeval", "run", "--api-key", REDACTED, "--note=[REDACTED]"]


def test_key_shapes_without_env() -> None:
    out = redact(
        {
            "text": "use sk-ant-api03-AbCdEfGhIjKlMnOpQrSt and sk-proj-0123456789abcdefXYZ",
            "hdr": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
            "gh": "ghp_" + "a" * 36,
            "envdump": 'OPENAI_API_KEY=abcdef123456 HOME=/root GITHUB_TOKEN="tok tok tok"',
        }
    )
    assert out["text"] == f"use {REDACTED} and {REDACTED}"
    assert out["hdr"] == f"Authorization: Bearer {REDACTED}"
    assert out["gh"] == REDACTED
    assert out["envdump"] == f"OPENAI_API_KEY={REDACTED} HOME=/root GITHUB_TOKEN={REDACTED}"


def test_ordinary_text_and_counts_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORT_KEY", "abc")  # too short to redact
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    record = {
        "input_tokens": 100,
        "max_tokens": 4096,
        "eos_token": "</s>",
        "api_key_env": "OPENAI_API_KEY",
        "text": "task-abcdefghijklmnopqrstuvw is false abc; MAX_TOKENS=100000",
        "api_key": None,
    }
    assert redact(record) == record


def test_secret_field_names() -> None:
    for name in ["api_key", "apiKey", "x-api-key", "Authorization", "OPENAI_API_KEY", "password",
                 "client_secret", "access_token", "token", "Cookie"]:  # fmt: skip
        assert is_secret_field(name), name
    for name in ["tokens", "input_tokens", "max_tokens", "eos_token", "key", "sort_key",
                 "api_key_env", "keyword", "secretary_id"]:  # fmt: skip
        assert not is_secret_field(name), name


def test_env_values_found_as_substrings_and_redaction_is_idempotent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567")
    monkeypatch.setenv("DB_PASSWORD", "pw_abcdef")
    text = "a tok-1234567b and pw_abcdef."
    once = redact_text(text)
    assert once == f"a {REDACTED}b and {REDACTED}."
    assert redact_text(once) == once
    assert redact({("tuple",): 1}) == {("tuple",): 1}  # non-string keys pass through
    assert redact(("x", "tok-1234567")) == ["x", REDACTED]


def test_redact_argv() -> None:
    argv = ["metaeval", "--token", "abc", "--model", "m", "--password=xyz", "--api-key-env", "K"]
    assert redact_argv(argv) == [
        "metaeval", "--token", REDACTED, "--model", "m", f"--password={REDACTED}",
        "--api-key-env", "K",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("auth: bEaReR abcdefgh123", f"auth: bEaReR {REDACTED}"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----", REDACTED),
        ("id AKIA" + "A" * 16 + " end", f"id {REDACTED} end"),
        ("hf_" + "b" * 24, REDACTED),
        ("gho_" + "c" * 30, REDACTED),
        ("x sk-ant-" + "d" * 20, f"x {REDACTED}"),
        ("DB_PASSWD=hunter22", f"DB_PASSWD={REDACTED}"),
    ],
)
def test_every_shape_is_scrubbed_inside_a_long_text(text: str, expected: str) -> None:
    # The literal guards that skip regex scans must never skip a text holding the shape,
    # wherever it sits in a long text.
    filler = "plain prose without credentials.\n" * 2000
    out = redact_text(filler + text + "\n" + filler)
    assert out == filler + expected + "\n" + filler


def test_env_secret_set_after_a_redaction_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert redact_text("value zq9-late-secret-value") == "value zq9-late-secret-value"
    monkeypatch.setenv("LATE_SERVICE_TOKEN", "zq9-late-secret-value")
    assert redact_text("value zq9-late-secret-value here") == f"value {REDACTED} here"


@pytest.mark.parametrize(
    "text",
    [
        "auth: bEaReR abcdefgh123",
        "id AKIA" + "A" * 16 + " end",
        "hf_" + "b" * 24,
        "gho_" + "c" * 30,
        "x sk-ant-" + "d" * 20,
        "DB_PASSWD=hunter22",
    ],
)
def test_short_texts_are_scrubbed_every_time_they_recur(text: str) -> None:
    # Short strings are remembered once scrubbed: the second sighting (as a value or as a
    # dict key) must come out as scrubbed as the first.
    first = redact_text(text)
    assert REDACTED in first and first == redact_text(text)
    record = redact({text: text, "k": [text, {"n": text}]})
    assert all(REDACTED in key for key in record if key != "k")
    assert REDACTED in record["k"][0] and REDACTED in record["k"][1]["n"]


def test_a_remembered_short_text_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "id qx7-recurring-value"
    assert redact_text(text) == text
    assert redact({"a": text}) == {"a": text}
    monkeypatch.setenv("RECURRING_API_TOKEN", "qx7-recurring-value")
    assert redact_text(text) == f"id {REDACTED}"
    assert redact({"a": text}) == {"a": f"id {REDACTED}"}
    monkeypatch.delenv("RECURRING_API_TOKEN")
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sk-" + "a" * 20, REDACTED),  # at the very start
        ("key: sk-" + "a" * 20 + " end", f"key: {REDACTED} end"),
        ("task-" + "a" * 20, "task-" + "a" * 20),  # a word ending in "sk" is not a key
        ("x_sk-" + "a" * 20, "x_sk-" + "a" * 20),
        ("-sk-" + "a" * 20, "-sk-" + "a" * 20),
        ("sk-sk-" + "a" * 20, REDACTED),
        ("sk-short", "sk-short"),
    ],
)
def test_api_key_shape_needs_a_boundary_before_sk(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    filler = "task-00001 checks the output file.\n" * 500  # many "sk-" that are not keys
    assert redact_text(filler + text) == filler + expected


def encodings(value: str) -> dict[str, str]:
    """Every common encoding of `value` a hostile process could print to dodge the redactor:
    base64 at each alignment (a prefix of 0, 1 or 2 bytes), standard and URL-safe, hex lower
    and upper, reversed."""
    data = value.encode()
    forms = {"reversed": value[::-1], "hex": data.hex(), "HEX": data.hex().upper()}
    for pad in (b"", b"x", b"xy"):
        forms[f"b64+{len(pad)}"] = base64.b64encode(pad + data).decode()
        forms[f"urlsafe+{len(pad)}"] = base64.urlsafe_b64encode(pad + data).decode()
        forms[f"b64+{len(pad)}+tail"] = base64.b64encode(pad + data + b"!tail").decode()
    return forms


def test_encoded_forms_of_a_secret_value_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    planted = "sk-planted-" + "Zq9" * 10
    monkeypatch.setenv("PLANTED_API_KEY", planted)
    for name, form in encodings(planted).items():
        for text in (form, f"log: {form} end", f"{{'v': '{form}'}}\n"):
            out = redact_text(text)
            assert form not in out and REDACTED in out, (name, out)
            assert redact({"note": text})["note"] == out
        assert form.encode() not in redact_bytes(f"x {form} y".encode()), name
    # Unrelated base64 and hex around it are kept.
    other = base64.b64encode(b"an ordinary payload of bytes").decode()
    assert redact_text(other) == other and redact_text("deadbeef") == "deadbeef"


def test_a_secret_the_process_made_is_scrubbed_in_every_encoded_form() -> None:
    import importlib
    import secrets

    redact = importlib.import_module("metaeval.records.redact")  # the module, not the function
    token = "mgw-" + secrets.token_urlsafe(32)  # as a gateway makes one; never in os.environ
    data = token.encode()
    forms = [token[::-1], data.hex(), data.hex().upper()]
    forms += [base64.b64encode(pad + data).decode() for pad in (b"", b"x", b"xy")]
    forms += [base64.urlsafe_b64encode(pad + data).decode() for pad in (b"", b"x", b"xy")]
    before = [redact.redact_text(f"printed: {form}") for form in forms]
    redact.add_secret(token)
    after = [redact.redact_text(f"printed: {form}") for form in forms]
    assert before == [f"printed: {form}" for form in forms]  # the shape net alone misses them
    for form, text in zip(forms, after, strict=True):
        assert "[REDACTED]" in text and form not in text, (form, text)
    for i in range(redact.MAX_ADDED_SECRETS + 3):  # only the most recent ones are kept
        redact.add_secret(f"made-secret-{i:04d}")
    assert len(redact._added_secrets) == redact.MAX_ADDED_SECRETS
    assert "made-secret-0000" not in redact._added_secrets
