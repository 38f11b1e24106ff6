"""The BFCL-style AST checker of function-calling tasks (the verifier every such task carries).

A function-calling task (Harbor layout, see `write_function_task`) gives the agent function
docs and a user request; the agent writes its calls as JSON to `/app/result.json`, a list of
`{"name": ..., "arguments": {...}}`. The verifier compares them with the task's possible
answer the way the Berkeley Function Calling Leaderboard's AST checker does. The possible
answer is BFCL's `ground_truth`: a list with one entry per expected call, each
`{function name: {parameter: [acceptable values]}}`.

Checker semantics (a re-implementation in our own words, not a copy of BFCL's code):

- the number of calls must equal the number of expected calls; calls are matched to
  expected calls without regard to order (a maximum bipartite matching, so every expected
  call is matched by exactly one call); simple, multiple (one call, chosen among several
  functions) and parallel (several calls) tasks all follow from this rule;
- a call matches an expected call when the function names are equal, every required
  parameter of the function doc is present, no parameter is unexpected (absent from the
  function doc or from the possible answer), every value has the declared type and is one
  of the acceptable values, and every expected parameter left out lists "" among its
  acceptable values (the marker for "may be omitted"; "" is never itself a value);
- types follow the doc: an integer is accepted for a float parameter (JSON has a single
  number type, and BFCL lets Python widen int to float), a float never for an integer
  parameter, a boolean is never a number; array items are checked against `items.type`;
  when a value has another type than declared but the same type as the acceptable values,
  it is compared by value (BFCL's rule for answers spelt as variables);
- strings compare after normalization: lowercase, whitespace and the characters
  `, . / - _ * ^` removed, single quotes read as double quotes (so "April 1, 2024",
  "april 1 2024" and "April 1,2024" are equal); lists compare element by element with the
  same normalization of string elements; a dict's acceptable values are spelt
  `{key: [acceptable values]}` and compare key by key (a key may be left out when "" is
  among its acceptable values); a list of dicts compares dict by dict, in order.

The checker core lives between the `checker begin` / `checker end` markers below. It is
stdlib only, and `bfcl_verifier.render_checker()` turns it into the standalone
`tests/check.py` each task carries, so a task runs without metaeval installed in its
sandbox; `bfcl_verifier.check_calls` and `check_file` run the same code in process.
"""

from __future__ import annotations

import json
import re
import sys

RESULT_FILE = "/app/result.json"

# --- checker begin: stdlib only; rendered verbatim into every task's tests/check.py

STRIP_CHARS = re.compile(r"[\s,./\-_*^]")

TYPE_ALIASES = {
    "string": "string",
    "str": "string",
    "integer": "integer",
    "int": "integer",
    "float": "float",
    "number": "float",
    "double": "float",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "dict": "dict",
    "object": "dict",
    "any": "any",
}


def normalize_string(text):
    """Lowercase, drop whitespace and , . / - _ * ^, read single quotes as double quotes."""
    return STRIP_CHARS.sub("", text).lower().replace("'", '"')


def is_omit_marker(value):
    return isinstance(value, str) and value == ""


def may_omit(acceptable):
    """True when "" is among the acceptable values: the parameter may be left out."""
    return any(is_omit_marker(item) for item in acceptable)


def one_of(value, acceptable):
    """True when `value` equals one of the acceptable values ("" markers never match)."""
    return any(same_value(value, item) for item in acceptable if not is_omit_marker(item))


def same_value(value, expected):
    """Type-strict equality with BFCL's string normalization, element by element."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    if isinstance(value, int | float) and isinstance(expected, int | float):
        return value == expected
    if isinstance(value, str) and isinstance(expected, str):
        return normalize_string(value) == normalize_string(expected)
    if isinstance(value, list) and isinstance(expected, list):
        return len(value) == len(expected) and all(
            same_value(v, e) for v, e in zip(value, expected, strict=True)
        )
    if isinstance(value, dict) and isinstance(expected, dict):
        return dict_matches(value, expected) or (
            set(value) == set(expected) and all(same_value(value[k], expected[k]) for k in value)
        )
    return value is None and expected is None


def dict_matches(value, expected):
    """A dict against BFCL's spelling `{key: [acceptable values]}`."""
    if not expected or not all(isinstance(v, list) for v in expected.values()):
        return False
    if any(key not in expected for key in value):
        return False
    for key, acceptable in expected.items():
        if key in value:
            if not one_of(value[key], acceptable):
                return False
        elif not may_omit(acceptable):
            return False
    return True


def json_type(value):
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "dict"
    return "null"


def type_problem(name, value, spec):
    """Why `value` does not have the type the doc `spec` declares, or None."""
    declared = TYPE_ALIASES.get(str((spec or {}).get("type", "any")).lower(), "any")
    actual = json_type(value)
    if declared == "any" or actual == declared or (declared == "float" and actual == "integer"):
        items = (spec or {}).get("items")
        if declared == "array" and isinstance(items, dict):
            for index, item in enumerate(value):
                problem = type_problem(f"{name}[{index}]", item, items)
                if problem is not None:
                    return problem
        return None
    return f"parameter {name!r} should be {declared}, got {actual} {value!r}"


def spelt_like_answers(value, spec, values):
    """True when a value of another type than declared has the answers' own type (BFCL
    accepts such answers, spelt as variables, and compares them by value)."""
    declared = TYPE_ALIASES.get(str((spec or {}).get("type", "any")).lower(), "any")
    actual = json_type(value)
    return bool(values) and actual != declared and json_type(values[0]) == actual


def find_function(functions, name):
    for doc in functions:
        if isinstance(doc, dict) and doc.get("name") == name:
            return doc
    return None


def match_call(call, expected_name, expected_params, functions):
    """Reasons why one call does not match one expected call (empty: it matches)."""
    name = call["name"]
    if name != expected_name:
        return [f"function {name!r} is not the expected {expected_name!r}"]
    doc = find_function(functions, expected_name)
    if doc is None:
        return [f"function {expected_name!r} is not among the function docs"]
    parameters = doc.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = parameters.get("required") or []
    arguments = call["arguments"]
    reasons = []
    for param in required:
        if param not in arguments:
            reasons.append(f"missing required parameter {param!r}")
    for param, value in arguments.items():
        if param not in properties or param not in expected_params:
            reasons.append(f"unexpected parameter {param!r}")
            continue
        acceptable = expected_params[param]
        problem = type_problem(param, value, properties[param])
        values = [item for item in acceptable if not is_omit_marker(item)]
        if problem is not None and not spelt_like_answers(value, properties[param], values):
            reasons.append(problem)
        elif not one_of(value, acceptable):
            reasons.append(f"parameter {param!r} = {value!r} is not one of {values!r}")
    for param, acceptable in expected_params.items():
        if param not in arguments and param not in required and not may_omit(acceptable):
            reasons.append(f"parameter {param!r} is missing and may not be left out")
    return reasons


def read_ground_truth(possible_answer):
    """[(name, {param: [acceptable]})] from BFCL's ground_truth (or a record holding it)."""
    if isinstance(possible_answer, dict) and "ground_truth" in possible_answer:
        possible_answer = possible_answer["ground_truth"]
    if not isinstance(possible_answer, list):
        raise ValueError("possible answer: expected a list of {function: {param: [values]}}")
    expected = []
    for index, entry in enumerate(possible_answer):
        if not isinstance(entry, dict) or len(entry) != 1:
            raise ValueError(f"possible answer #{index}: expected one {{function: params}} entry")
        [(name, params)] = entry.items()
        if not isinstance(params, dict) or not all(isinstance(v, list) for v in params.values()):
            raise ValueError(f"possible answer #{index}: expected {{param: [acceptable values]}}")
        expected.append((name, params))
    return expected


def read_functions(functions):
    """The list of function docs (a bare doc, or a BFCL record's "function" entry)."""
    if isinstance(functions, dict):
        functions = functions.get("function", [functions])
    if not isinstance(functions, list) or not all(isinstance(f, dict) for f in functions):
        raise ValueError("functions: expected a list of function docs")
    return functions


def read_calls(calls):
    """(calls, problems): each call as {"name", "arguments"}; arguments may be a JSON text."""
    if not isinstance(calls, list):
        return [], [f"the result must be a JSON list of calls, got {json_type(calls)}"]
    parsed, problems = [], []
    for index, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            problems.append(f"call #{index} is not an object with a string 'name'")
            continue
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = None
        if not isinstance(arguments, dict):
            problems.append(f"call #{index} ({call['name']!r}): 'arguments' is not an object")
            continue
        parsed.append({"name": call["name"], "arguments": arguments})
    return parsed, problems


def find_matching(table):
    """A maximum matching of expected calls (rows) to calls (columns); table[i][j] is a
    list of reasons, empty when call j matches expected call i. Returns row -> column."""
    owner: dict[int, int] = {}  # column -> row

    def augment(row, seen):
        for column, reasons in enumerate(table[row]):
            if reasons or column in seen:
                continue
            seen.add(column)
            if column not in owner or augment(owner[column], seen):
                owner[column] = row
                return True
        return False

    for row in range(len(table)):
        augment(row, set())
    return {row: column for column, row in owner.items()}


def check_calls_raw(calls, possible_answer, functions):
    """Reasons the calls fail the possible answer; an empty list means they pass.

    Raises ValueError when the possible answer or the function docs are malformed.
    """
    expected = read_ground_truth(possible_answer)
    functions = read_functions(functions)
    parsed, problems = read_calls(calls)
    if problems:
        return problems
    if len(parsed) != len(expected):
        names = [name for name, _ in expected]
        return [f"expected {len(expected)} call(s) ({', '.join(names)}), got {len(parsed)}"]
    table = [
        [match_call(call, name, params, functions) for call in parsed] for name, params in expected
    ]
    matching = find_matching(table)
    if len(matching) == len(expected):
        return []
    if len(expected) == 1:
        return table[0][0]
    reasons = []
    for row, (name, _) in enumerate(expected):
        if row in matching:
            continue
        candidates = [(len(r), column, r) for column, r in enumerate(table[row])]
        same_name = [c for c in candidates if parsed[c[1]]["name"] == name]
        if not same_name:
            reasons.append(f"expected call #{row} to {name!r}: no call to that function")
            continue
        _, column, closest = min(same_name)
        detail = "; ".join(closest) or "it is needed by another expected call"
        reasons.append(
            f"expected call #{row} to {name!r} is unmatched (closest call #{column}: {detail})"
        )
    return reasons


def load_json(path, what):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{what} {path}: {exc}") from exc


def check_paths(result_path, answer_path, functions_path):
    """Reasons the result file fails; raises ValueError for a bad answer or functions file."""
    answer = load_json(answer_path, "possible answer")
    functions = load_json(functions_path, "functions")
    try:
        with open(result_path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return [f"no result file at {result_path}"]
    except (OSError, UnicodeDecodeError) as exc:
        return [f"cannot read the result file {result_path}: {exc}"]
    try:
        calls = json.loads(text)
    except ValueError as exc:
        return [f"the result file {result_path} is not valid JSON: {exc}"]
    return check_calls_raw(calls, answer, functions)


def checker_main(argv):
    """CLI: check RESULT ANSWER FUNCTIONS; exit 0 pass, 1 fail, 2 bad input."""
    if len(argv) != 3:
        print("usage: check.py RESULT ANSWER FUNCTIONS", file=sys.stderr)
        return 2
    try:
        reasons = check_paths(argv[0], argv[1], argv[2])
    except ValueError as exc:
        print(f"checker error: {exc}", file=sys.stderr)
        return 2
    if reasons:
        print("FAIL")
        for reason in reasons:
            print(f"- {reason}")
        return 1
    print("PASS")
    return 0


# --- checker end
