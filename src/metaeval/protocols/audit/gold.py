"""Gold issues for scoring an audit: known defects per task, each tagged with a subcategory.

File format (JSON)::

    {"provenance": "optional: where the issues come from",
     "tasks": {"<task_id>": {"issues": [
        {"id": "a", "description": "...", "category": "INST-INCOMPLETE", "evidence": "optional"}
    ]}}}

`category` is a subcategory code from the taxonomy (findings.SUBCATEGORIES). A task listed with
an empty `issues` list is a known-clean task. Every problem is reported as a ConfigError that
names the file and the exact field path, e.g. ``tasks.scale-01.issues[1].category``; the
JSON itself is read by `metaeval.config_files.parse_json`, which refuses a repeated key (named in
the message), NaN and Infinity.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from metaeval.config_files import parse_json
from metaeval.errors import ConfigError
from metaeval.protocols.audit.findings import SUBCATEGORIES, TAXONOMY
from metaeval.records import sha256_text
from metaeval.records.nofollow import read_capped

MAX_GOLD_BYTES = 64 * 1024 * 1024
"""A gold file larger than this is not read."""
ISSUE_FIELDS = {"id": True, "description": True, "category": True, "evidence": False}
TASK_FIELDS = {"issues"}
_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_\-]+$")
_SUBCATEGORY_ORDER = {sub: i for i, sub in enumerate(s for subs in TAXONOMY.values() for s in subs)}


class GoldIssue(BaseModel):
    """One known, independently fixable defect of one task."""

    task_id: str
    id: str
    description: str
    category: str  # a subcategory code, e.g. "INST-INCOMPLETE"
    evidence: str = ""

    @property
    def top_category(self) -> str:
        """The top-level category (GT, EVAL, INST, ENV) of `category`."""
        return SUBCATEGORIES[self.category]


class Gold(BaseModel):
    """A parsed gold file: task id -> its gold issues (possibly none: a known-clean task)."""

    path: str = ""
    sha256: str = ""  # "sha256:<hex>" of the file's text, for manifests
    provenance: str = ""  # where the issues come from (a paper's table, a review), if given
    tasks: dict[str, list[GoldIssue]] = Field(default_factory=dict)

    def issues_for(self, task_id: str) -> list[GoldIssue]:
        """The gold issues of `task_id` ([] for a clean or unknown task)."""
        return self.tasks.get(task_id, [])

    def all_issues(self) -> Iterator[GoldIssue]:
        """Every gold issue, tasks in file order, issues in file order."""
        for issues in self.tasks.values():
            yield from issues

    @property
    def n_issues(self) -> int:
        return sum(len(issues) for issues in self.tasks.values())

    @property
    def defective_tasks(self) -> list[str]:
        """Tasks with at least one gold issue, in file order."""
        return [task for task, issues in self.tasks.items() if issues]

    def is_defective(self, task_id: str) -> bool:
        return bool(self.tasks.get(task_id))

    @property
    def categories(self) -> list[str]:
        """Subcategory codes present among the gold issues, in taxonomy order."""
        present = {issue.category for issue in self.all_issues()}
        return sorted(present, key=lambda c: _SUBCATEGORY_ORDER[c])


# ---------------------------------------------------------------------------------------------
# Parsing


def _key_path(parent: str, key: str) -> str:
    if _SIMPLE_KEY.match(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key)}]"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
    }.get(type(value), type(value).__name__)


class _Parser:
    def __init__(self, file: str):
        self.file = file

    def fail(self, field: str | None, message: str) -> ConfigError:
        return ConfigError(message, file=self.file, field=field)

    def obj(self, value: Any, field: str, allowed: set[str] | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(field or None, f"expected an object, got {_type_name(value)}")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    known = ", ".join(sorted(allowed))
                    raise self.fail(_key_path(field, key), f"unknown field (expected {known})")
        return value

    def text(self, value: Any, field: str, *, required: bool) -> str:
        if not isinstance(value, str):
            raise self.fail(field, f"expected a string, got {_type_name(value)}")
        if required and not value.strip():
            raise self.fail(field, "must not be empty")
        return value

    def category(self, value: Any, field: str) -> str:
        code = self.text(value, field, required=True)
        if code not in SUBCATEGORIES:
            close = difflib.get_close_matches(code.upper(), list(SUBCATEGORIES), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise self.fail(
                field,
                f"unknown subcategory '{code}'{hint}; expected one of " + ", ".join(SUBCATEGORIES),
            )
        return code

    def provenance(self, data: Any) -> str:
        root = self.obj(data, "")
        return self.text(root.get("provenance", ""), "provenance", required=False)

    def gold(self, data: Any) -> dict[str, list[GoldIssue]]:
        root = self.obj(data, "", {"tasks", "provenance"})
        if "tasks" not in root:
            raise self.fail("tasks", "missing required field")
        tasks_field = "tasks"
        tasks = self.obj(root["tasks"], tasks_field)
        out: dict[str, list[GoldIssue]] = {}
        for task_id, task_value in tasks.items():
            task_field = _key_path(tasks_field, task_id)
            if not task_id.strip():
                raise self.fail(task_field, "task id must not be empty")
            task = self.obj(task_value, task_field, TASK_FIELDS)
            issues_field = f"{task_field}.issues"
            if "issues" not in task:
                raise self.fail(issues_field, "missing required field")
            issues = task["issues"]
            if not isinstance(issues, list):
                raise self.fail(issues_field, f"expected an array, got {_type_name(issues)}")
            parsed: list[GoldIssue] = []
            seen: dict[str, int] = {}
            for i, issue_value in enumerate(issues):
                field = f"{issues_field}[{i}]"
                issue = self.obj(issue_value, field, set(ISSUE_FIELDS))
                for name, required in ISSUE_FIELDS.items():
                    if required and name not in issue:
                        raise self.fail(f"{field}.{name}", "missing required field")
                issue_id = self.text(issue["id"], f"{field}.id", required=True)
                if issue_id in seen:
                    raise self.fail(
                        f"{field}.id",
                        f"duplicate issue id '{issue_id}' (also {issues_field}[{seen[issue_id]}])",
                    )
                seen[issue_id] = i
                parsed.append(
                    GoldIssue(
                        task_id=task_id,
                        id=issue_id,
                        description=self.text(
                            issue["description"], f"{field}.description", required=True
                        ),
                        category=self.category(issue["category"], f"{field}.category"),
                        evidence=self.text(
                            issue.get("evidence", ""), f"{field}.evidence", required=False
                        ),
                    )
                )
            out[task_id] = parsed
        return out


def parse_gold(text: str, file: str = "<gold>") -> Gold:
    """Parse gold-file text; `file` names the source in error messages."""
    data = parse_json(text, file)  # duplicate keys, NaN and Infinity are refused
    parser = _Parser(file)
    tasks = parser.gold(data)
    return Gold(
        path=file, sha256=sha256_text(text), tasks=tasks, provenance=parser.provenance(data)
    )


def load_gold(path: str | Path) -> Gold:
    """Load and validate a gold file; any problem raises ConfigError naming file and field."""
    path = Path(path)
    # a benchmark's file: a regular file only (a FIFO or /dev/zero is refused at once), capped
    data = read_capped(path, MAX_GOLD_BYTES, follow_link=True)
    if data is None:
        raise ConfigError("gold file not found", file=str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"gold file is not UTF-8 text: {exc}", file=str(path)) from None
    return parse_gold(text, file=str(path))
