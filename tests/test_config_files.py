"""The one reader of user files: strict parsing, refusals that name the file and field."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, field_validator

from metaeval.config_files import FieldProblem, field_path, load, read_mapping, validate
from metaeval.errors import ConfigError


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    weight: float = 1.0


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    suites: list[Suite]

    @field_validator("suites")
    @classmethod
    def _names(cls, suites: list[Suite]) -> list[Suite]:
        if len({s.path for s in suites}) != len(suites):
            raise FieldProblem("path", "two suites name the same path")
        return suites


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_json_duplicate_key_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "m.json", '{"name": "a", "name": "b", "suites": []}')
    with pytest.raises(ConfigError) as err:
        read_mapping(path)
    assert err.value.file == str(path)
    assert "duplicate key 'name'" in str(err.value)


def test_yaml_duplicate_key_is_refused_with_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "m.yaml", "name: a\nsuites: []\nname: b\n")
    with pytest.raises(ConfigError) as err:
        read_mapping(path)
    assert "duplicate key 'name'" in str(err.value)
    assert "line 3" in str(err.value)


def test_yaml_with_python_tags_is_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = _write(tmp_path, "m.yml", f"x: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ConfigError):
        read_mapping(path)
    assert not marker.exists()


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected a mapping at the top level, found an array"):
        read_mapping(_write(tmp_path, "m.json", "[1, 2]"))


def test_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "m.json"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            read_mapping(fifo)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "reading a FIFO blocked"
    assert outcome and isinstance(outcome[0], ConfigError)
    assert "not a regular file" in str(outcome[0])


def test_users_own_symlink_is_followed(tmp_path: Path) -> None:
    real = _write(tmp_path, "real.yaml", "name: a\nsuites: []\n")
    (tmp_path / "sub").mkdir()
    link = tmp_path / "sub" / "link.yaml"
    link.symlink_to(real)
    assert read_mapping(link) == {"name": "a", "suites": []}


def test_oversized_and_non_utf8_files_are_refused(tmp_path: Path) -> None:
    big = _write(tmp_path, "big.json", '{"a": "' + "x" * 100 + '"}')
    with pytest.raises(ConfigError, match="larger than 50 bytes"):
        read_mapping(big, max_bytes=50)
    latin = tmp_path / "l.json"
    latin.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_mapping(latin)


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        read_mapping(tmp_path / "absent.yaml")
    assert err.value.file == str(tmp_path / "absent.yaml")


def test_validation_names_nested_field_with_pydantic_spelling(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "m.yaml", "name: a\nsuites:\n  - path: x\n  - path: y\n    weight: heavy\n"
    )
    with pytest.raises(ConfigError) as err:
        load(path, Manifest)
    assert err.value.field == "suites.1.weight"
    assert err.value.file == str(path)


def test_unknown_key_is_reported_before_the_missing_one(tmp_path: Path) -> None:
    path = _write(tmp_path, "m.json", '{"nmae": "a", "suites": []}')
    with pytest.raises(ConfigError) as err:
        load(path, Manifest)
    assert err.value.field == "nmae"
    assert "unknown field" in str(err.value)
    assert "name: required field is missing" in str(err.value)


def test_field_problem_names_the_sub_field() -> None:
    data = {"name": "a", "suites": [{"path": "x"}, {"path": "x"}]}
    with pytest.raises(ConfigError) as err:
        validate(Manifest, data, file="inline.json", prefix="manifest")
    assert err.value.field == "manifest.suites.path"
    assert "two suites name the same path" in str(err.value)


def test_field_path_spelling() -> None:
    assert field_path(("suites", 0, "path")) == "suites.0.path"
    assert field_path(()) == ""


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_constants_outside_the_standard_are_refused(tmp_path: Path, constant: str) -> None:
    path = _write(tmp_path, "m.json", '{"name": "a", "weight": ' + constant + "}")
    with pytest.raises(ConfigError, match=f"{constant} is not valid JSON"):
        read_mapping(path)


def test_malformed_json_names_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "m.json", '{\n  "name": "a",\n  "suites": [1,]\n}')
    with pytest.raises(ConfigError, match="invalid JSON at line 3, column 16"):
        read_mapping(path)
