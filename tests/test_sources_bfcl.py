"""tasks/sources/bfcl*.py: the BFCL-style AST checker, its standalone copies, the task writer
and the loader.

Every expected verdict below is worked out by hand from the checker rules in the
metaeval.tasks.sources.bfcl_checker docstring.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.agents.in_trial import TrialAgent
from metaeval.agents.registry import get_agent
from metaeval.errors import ConfigError, ProviderUnavailableError
from metaeval.protocols.audit.task_view import load_task
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable
from metaeval.tasks.limits import trial_limits
from metaeval.tasks.rooms import BwrapBackend
from metaeval.tasks.sources import bfcl
from metaeval.tasks.sources.bfcl import (
    bfcl_data_dir,
    canonical_calls,
    load_bfcl_tasks,
    write_function_task,
)
from metaeval.tasks.sources.bfcl_checker import normalize_string
from metaeval.tasks.sources.bfcl_verifier import (
    CheckResult,
    check_calls,
    check_file,
    render_checker,
    sync_checkers,
)
from metaeval.tasks.trial import run_trial

ROOT = Path(__file__).resolve().parents[1]
FC_SUITE = ROOT / "examples" / "improve-suites" / "function-calling"
FC_TASKS = sorted(p for p in FC_SUITE.iterdir() if (p / "task.toml").is_file())

BOOK = {
    "name": "book_table",
    "description": "Book a restaurant table.",
    "parameters": {
        "type": "dict",
        "properties": {
            "restaurant": {"type": "string"},
            "party_size": {"type": "integer"},
            "budget": {"type": "float"},
            "outdoor": {"type": "boolean"},
            "dishes": {"type": "array", "items": {"type": "string"}},
            "contact": {"type": "dict"},
        },
        "required": ["restaurant", "party_size"],
    },
}
ROOM = {
    "name": "book_room",
    "parameters": {
        "type": "dict",
        "properties": {"hotel": {"type": "string"}},
        "required": ["hotel"],
    },
}
FUNCTIONS = [BOOK, ROOM]
ANSWER = [
    {
        "book_table": {
            "restaurant": ["Chez Panisse", "Chez Panisse Berkeley"],
            "party_size": [4],
            "budget": [120.0, ""],
            "outdoor": [True, ""],
            "dishes": [["soup", "bread"], ["bread", "soup"], ""],
            "contact": [{"name": ["Ana"], "phone": ["555-0100", ""]}, ""],
        }
    }
]


def call(name: str = "book_table", **arguments: object) -> list[dict]:
    base: dict[str, object] = {"restaurant": "Chez Panisse", "party_size": 4}
    base.update(arguments)
    return [{"name": name, "arguments": {k: v for k, v in base.items() if v is not DROP}}]


DROP = object()


def verdict(calls: object, answer: object = ANSWER, functions: object = FUNCTIONS) -> CheckResult:
    return check_calls(calls, answer, functions)


# --------------------------------------------------------------------------- checker


def test_exact_call_with_optional_parameters_left_out_passes() -> None:
    assert verdict(call()) == CheckResult(passed=True, reasons=[])


def test_every_optional_parameter_given_correctly_passes() -> None:
    calls = call(
        budget=120.0,
        outdoor=True,
        dishes=["soup", "bread"],
        contact={"name": "Ana", "phone": "555-0100"},
    )
    assert verdict(calls).passed


def test_wrong_function_name_fails() -> None:
    result = verdict(call(name="book_room"))
    assert not result.passed
    assert result.reasons == ["function 'book_room' is not the expected 'book_table'"]


def test_missing_required_parameter_fails() -> None:
    result = verdict(call(party_size=DROP))
    assert result.reasons == ["missing required parameter 'party_size'"]


def test_wrong_value_fails() -> None:
    result = verdict(call(party_size=5))
    assert result.reasons == ["parameter 'party_size' = 5 is not one of [4]"]


def test_acceptable_alternative_passes() -> None:
    assert verdict(call(restaurant="Chez Panisse Berkeley")).passed


def test_int_is_accepted_for_a_float_parameter_but_not_float_for_int() -> None:
    assert verdict(call(budget=120)).passed
    assert not verdict(call(budget=119)).passed
    result = verdict(call(party_size=4.0))
    assert result.reasons == ["parameter 'party_size' should be integer, got float 4.0"]


def test_boolean_is_not_a_number_and_number_not_a_boolean() -> None:
    assert verdict(call(outdoor=1)).reasons == [
        "parameter 'outdoor' should be boolean, got integer 1"
    ]
    assert not verdict(call(party_size=True)).passed


@pytest.mark.parametrize(
    ("value", "passes"),
    [
        ("chez panisse", True),  # case
        ("CHEZ-PANISSE.", True),  # '-' and '.' are dropped
        ("Chez_Panisse", True),  # '_' is dropped
        (" Chez  Panisse ", True),  # whitespace is dropped
        ("Chez Panisse!", False),  # '!' is not among the dropped characters
        ("Chez Panise", False),
    ],
)
def test_string_normalization(value: str, passes: bool) -> None:
    assert verdict(call(restaurant=value)).passed is passes


def test_normalize_string_by_hand() -> None:
    assert normalize_string("April 1, 2024") == "april12024"
    assert normalize_string("April 1,2024") == "april12024"
    assert normalize_string("It's 5*3^2 / 1.0") == 'it"s53210'


def test_lists_compare_element_wise_in_order() -> None:
    assert verdict(call(dishes=["Bread", "soup"])).passed  # second acceptable list
    assert not verdict(call(dishes=["soup"])).passed
    assert not verdict(call(dishes=["soup", "bread", "soup"])).passed
    assert verdict(call(dishes=["soup", 3])).reasons == [
        "parameter 'dishes[1]' should be string, got integer 3"
    ]


def test_dicts_compare_key_by_key() -> None:
    assert verdict(call(contact={"name": "ana"})).passed  # phone may be left out
    assert verdict(call(contact={"name": "Ana", "phone": "555 0100"})).passed
    assert not verdict(call(contact={"name": "Ana", "email": "a@x"})).passed  # unexpected key
    assert not verdict(call(contact={"phone": "555-0100"})).passed  # name may not be left out


def test_unexpected_parameter_fails() -> None:
    result = verdict(call(time="19:00"))
    assert result.reasons == ["unexpected parameter 'time'"]


def test_optional_parameter_without_empty_marker_must_be_given() -> None:
    answer = [{"book_table": {**ANSWER[0]["book_table"], "budget": [120.0]}}]
    result = verdict(call(), answer)
    assert result.reasons == ["parameter 'budget' is missing and may not be left out"]
    assert verdict(call(budget=120.0), answer).passed


def test_empty_string_marks_omission_and_is_not_a_value() -> None:
    answer = [{"book_room": {"hotel": ["Ritz"]}}]
    assert not verdict([{"name": "book_room", "arguments": {"hotel": ""}}], answer).passed
    result = verdict(call(budget=""))
    assert result.reasons == ["parameter 'budget' should be float, got string ''"]


def test_multiple_wrong_function_choice_fails() -> None:
    answer = [{"book_room": {"hotel": ["Ritz", "The Ritz"]}}]
    good = [{"name": "book_room", "arguments": {"hotel": "the ritz"}}]
    assert verdict(good, answer).passed
    result = verdict(call(), answer)
    assert result.reasons == ["function 'book_table' is not the expected 'book_room'"]


PARALLEL = [
    {"book_room": {"hotel": ["Ritz"]}},
    {"book_room": {"hotel": ["Savoy"]}},
    {"book_table": {"restaurant": ["Nopa"], "party_size": [2]}},
]


def room(hotel: str) -> dict:
    return {"name": "book_room", "arguments": {"hotel": hotel}}


def test_parallel_calls_match_in_any_order() -> None:
    table = {"name": "book_table", "arguments": {"restaurant": "nopa", "party_size": 2}}
    assert verdict([room("Ritz"), room("Savoy"), table], PARALLEL).passed
    assert verdict([table, room("Savoy"), room("Ritz")], PARALLEL).passed


def test_parallel_each_expected_call_is_matched_once() -> None:
    table = {"name": "book_table", "arguments": {"restaurant": "nopa", "party_size": 2}}
    result = verdict([room("Ritz"), room("Ritz"), table], PARALLEL)
    assert not result.passed
    assert result.reasons == [
        "expected call #1 to 'book_room' is unmatched "
        "(closest call #0: parameter 'hotel' = 'Ritz' is not one of ['Savoy'])"
    ]


def test_parallel_wrong_count_fails() -> None:
    result = verdict([room("Ritz"), room("Savoy")], PARALLEL)
    assert result.reasons == ["expected 3 call(s) (book_room, book_room, book_table), got 2"]


def test_parallel_matching_is_not_greedy() -> None:
    # The first expected call accepts both hotels, the second only Ritz: matching the first
    # greedily to call #0 (Ritz) would leave nothing for the second.
    answer = [{"book_room": {"hotel": ["Ritz", "Savoy"]}}, {"book_room": {"hotel": ["Ritz"]}}]
    assert verdict([room("Ritz"), room("Savoy")], answer).passed


def test_malformed_results_fail_with_reasons() -> None:
    assert verdict({"name": "book_table"}).reasons == [
        "the result must be a JSON list of calls, got dict"
    ]
    assert verdict([{"arguments": {}}]).reasons == ["call #0 is not an object with a string 'name'"]
    assert verdict([{"name": "book_table", "arguments": [1]}]).reasons == [
        "call #0 ('book_table'): 'arguments' is not an object"
    ]
    as_text = [{"name": "book_table", "arguments": json.dumps(call()[0]["arguments"])}]
    assert verdict(as_text).passed  # OpenAI-style arguments as a JSON text


def test_malformed_answer_or_functions_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="possible answer"):
        verdict(call(), {"book_table": {}})
    with pytest.raises(ConfigError, match="functions"):
        verdict(call(), ANSWER, "nope")


# --------------------------------------------------------------------------- files and CLI


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    answer = tmp_path / "possible_answer.json"
    functions = tmp_path / "functions.json"
    answer.write_text(json.dumps({"id": "t", "ground_truth": ANSWER}))
    functions.write_text(json.dumps(FUNCTIONS))
    return tmp_path / "result.json", answer, functions


def test_check_file_verdicts(files: tuple[Path, Path, Path]) -> None:
    result, answer, functions = files
    missing = check_file(result, answer, functions)
    assert missing == CheckResult(passed=False, reasons=[f"no result file at {result}"])
    result.write_text("[{not json")
    invalid = check_file(result, answer, functions)
    assert not invalid.passed and "is not valid JSON" in invalid.reasons[0]
    result.write_text(json.dumps(call()))
    assert check_file(result, answer, functions).passed
    answer.write_text("{")
    with pytest.raises(ConfigError, match="possible answer"):
        check_file(result, answer, functions)


CLI_CASES = [
    (call(), 0, "PASS"),
    (call(party_size=5), 1, "FAIL\n- parameter 'party_size' = 5 is not one of [4]"),
    (None, 1, "FAIL\n- no result file at"),
]


@pytest.mark.parametrize(("calls", "code", "output"), CLI_CASES)
def test_cli_and_standalone_checker_agree(
    files: tuple[Path, Path, Path], tmp_path: Path, calls: object, code: int, output: str
) -> None:
    result, answer, functions = files
    if calls is not None:
        result.write_text(json.dumps(calls))
    checker = tmp_path / "check.py"
    checker.write_text(render_checker())
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    args = [str(result), str(answer), str(functions)]
    for argv in (
        [sys.executable, "-m", "metaeval.tasks.sources.bfcl", "check", *args],
        [sys.executable, str(checker), *args],
    ):
        run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
        assert run.returncode == code, run.stderr
        assert run.stdout.startswith(output)
    assert check_file(result, answer, functions).passed is (code == 0)


def test_standalone_checker_exits_2_on_a_bad_answer_file(
    files: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    result, answer, functions = files
    result.write_text(json.dumps(call()))
    answer.write_text(json.dumps({"ground_truth": "nope"}))
    checker = tmp_path / "check.py"
    checker.write_text(render_checker())
    run = subprocess.run(
        [sys.executable, str(checker), str(result), str(answer), str(functions)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "checker error" in run.stderr


def test_rendered_checker_is_stdlib_only_and_compiles() -> None:
    source = render_checker()
    compile(source, "check.py", "exec")
    imports = {line.split()[1] for line in source.splitlines() if line.startswith("import ")}
    assert imports == {"json", "re", "sys"}
    assert not any(line.startswith("from ") for line in source.splitlines())
    assert "metaeval" not in source.replace("metaeval.tasks.sources.bfcl.render_checker", "")


# --------------------------------------------------------------------------- bundled tasks


@pytest.mark.parametrize("task", FC_TASKS, ids=[t.name for t in FC_TASKS])
def test_every_function_calling_task_carries_the_rendered_checker(task: Path) -> None:
    assert (task / "tests" / "check.py").read_text(encoding="utf-8") == render_checker()
    env_functions = json.loads((task / "environment" / "functions.json").read_text())
    assert json.loads((task / "tests" / "functions.json").read_text()) == env_functions


@pytest.mark.parametrize("task", FC_TASKS, ids=[t.name for t in FC_TASKS])
def test_every_function_calling_task_is_what_the_writer_produces(
    task: Path, tmp_path: Path
) -> None:
    question = json.loads((task / "environment" / "question.json").read_text())
    answer = json.loads((task / "tests" / "possible_answer.json").read_text())
    functions = json.loads((task / "environment" / "functions.json").read_text())
    again = write_function_task(
        tmp_path / task.name,
        messages=question["question"][0],
        functions=functions,
        ground_truth=answer["ground_truth"],
        category=answer["category"],
        task_id=task.name,
    )
    produced = sorted(p.relative_to(again).as_posix() for p in again.rglob("*") if p.is_file())
    bundled = sorted(p.relative_to(task).as_posix() for p in task.rglob("*") if p.is_file())
    assert produced == bundled
    for rel in produced:
        assert (again / rel).read_bytes() == (task / rel).read_bytes(), rel
    assert check_calls(canonical_calls(answer), answer, functions).passed


# --------------------------------------------------------------------------- loader


QUESTIONS = [
    {
        "id": "simple_python_0",
        "question": [[{"role": "user", "content": "Area of a triangle, base 10 and height 5?"}]],
        "function": [
            {
                "name": "calculate_triangle_area",
                "description": "Area of a triangle.",
                "parameters": {
                    "type": "dict",
                    "properties": {
                        "base": {"type": "integer", "description": "Base."},
                        "height": {"type": "integer", "description": "Height."},
                        "unit": {"type": "string", "description": "Unit; default 'units'."},
                    },
                    "required": ["base", "height"],
                },
            }
        ],
    },
    {  # multi-turn: skipped
        "id": "simple_python_1",
        "question": [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]],
        "function": [],
    },
    {  # no possible answer: skipped
        "id": "simple_python_2",
        "question": [[{"role": "user", "content": "c"}]],
        "function": [],
    },
    {
        "id": "simple_python_3",
        "question": [
            [
                {"role": "system", "content": "Be precise."},
                {"role": "user", "content": "Hypotenuse of 3 and 4?"},
            ]
        ],
        "function": {
            "name": "math.hypot",
            "description": "Euclidean norm.",
            "parameters": {
                "type": "dict",
                "properties": {"x": {"type": "float"}, "y": {"type": "float"}},
                "required": ["x", "y"],
            },
        },
    },
]
ANSWERS = [
    {
        "id": "simple_python_0",
        "ground_truth": [
            {"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}
        ],
    },
    {"id": "simple_python_1", "ground_truth": []},
    {"id": "simple_python_3", "ground_truth": [{"math.hypot": {"x": [3.0], "y": [4.0]}}]},
]


@pytest.fixture
def bfcl_data(tmp_path: Path) -> Path:
    data = tmp_path / "bfcl_eval" / "data"
    (data / "possible_answer").mkdir(parents=True)
    (tmp_path / "bfcl_eval" / "__init__.py").write_text("raise ImportError('do not import me')\n")
    lines = "\n".join(json.dumps(q) for q in QUESTIONS) + "\n"
    (data / "BFCL_v4_simple_python.json").write_text(lines)
    (data / "possible_answer" / "BFCL_v4_simple_python.json").write_text(
        "\n".join(json.dumps(a) for a in ANSWERS) + "\n"
    )
    # an older version of the category under its old name: the newest version wins
    (data / "BFCL_v3_simple.json").write_text(json.dumps(QUESTIONS[0]) + "\n")
    (data / "possible_answer" / "BFCL_v3_simple.json").write_text(json.dumps(ANSWERS[0]) + "\n")
    # a category without possible answers
    (data / "BFCL_v4_irrelevance.json").write_text(json.dumps(QUESTIONS[0]) + "\n")
    return data


def test_loader_writes_tasks_from_bfcl_files(bfcl_data: Path, tmp_path: Path) -> None:
    tasks = load_bfcl_tasks(tmp_path / "out", "simple", data_dir=bfcl_data)
    assert [t.name for t in tasks] == ["bfcl-simple-python-0", "bfcl-simple-python-3"]
    first, second = tasks
    assert (first / "tests" / "check.py").read_text() == render_checker()
    answer = json.loads((first / "tests" / "possible_answer.json").read_text())
    assert answer["ground_truth"] == ANSWERS[0]["ground_truth"]
    assert answer["category"] == "simple"
    assert (
        json.loads((first / "environment" / "functions.json").read_text())
        == (QUESTIONS[0]["function"])
    )
    question = json.loads((first / "environment" / "question.json").read_text())
    assert question["question"] == QUESTIONS[0]["question"]
    instruction = (first / "instruction.md").read_text()
    assert "Area of a triangle, base 10 and height 5?" in instruction
    assert '"calculate_triangle_area"' in instruction and "/app/result.json" in instruction
    solve = (first / "solution" / "solve.sh").read_text()
    assert '"base": 10' in solve and '"unit": "units"' in solve
    # a bare function doc is wrapped in a list; system messages are kept
    assert json.loads((second / "tests" / "functions.json").read_text()) == [
        QUESTIONS[3]["function"]
    ]
    assert "**system:** Be precise." in (second / "instruction.md").read_text()


def test_loader_limit_and_overwrite(bfcl_data: Path, tmp_path: Path) -> None:
    tasks = load_bfcl_tasks(tmp_path / "out", "simple_python", limit=1, data_dir=bfcl_data)
    assert [t.name for t in tasks] == ["bfcl-simple-python-0"]
    with pytest.raises(ConfigError, match="not empty"):
        load_bfcl_tasks(tmp_path / "out", "simple", limit=1, data_dir=bfcl_data)
    again = load_bfcl_tasks(tmp_path / "out", "simple", limit=1, data_dir=bfcl_data, overwrite=True)
    assert again == tasks
    with pytest.raises(ConfigError, match="limit"):
        load_bfcl_tasks(tmp_path / "out", "simple", limit=0, data_dir=bfcl_data)


def test_loader_category_errors(bfcl_data: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no BFCL question file for category 'live_simple'"):
        load_bfcl_tasks(tmp_path / "out", "live_simple", data_dir=bfcl_data)
    with pytest.raises(ConfigError, match="no possible answers"):
        load_bfcl_tasks(tmp_path / "out", "irrelevance", data_dir=bfcl_data)


def test_loader_without_the_package_names_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(bfcl.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ProviderUnavailableError, match="pip install bfcl-eval"):
        load_bfcl_tasks(tmp_path / "out", "simple", limit=1)


def test_loader_finds_the_installed_package_without_importing_it(
    bfcl_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(bfcl_data.parent.parent))
    monkeypatch.delitem(sys.modules, "bfcl_eval", raising=False)
    assert bfcl_data_dir() == bfcl_data
    tasks = load_bfcl_tasks(tmp_path / "out", "simple", limit=1)
    assert [t.name for t in tasks] == ["bfcl-simple-python-0"]
    assert "bfcl_eval" not in sys.modules


def test_cli_load(bfcl_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli-out"
    args = ["load", "simple", str(out), "--limit", "2", "--data-dir", str(bfcl_data)]
    assert bfcl.main(args) == 0
    assert capsys.readouterr().out.split() == [
        str(out / "bfcl-simple-python-0"),
        str(out / "bfcl-simple-python-3"),
    ]
    assert bfcl.main(["load", "nothing", str(out), "--data-dir", str(bfcl_data)]) == 2


def test_writer_refuses_a_ground_truth_its_own_solution_fails(tmp_path: Path) -> None:
    # a required parameter the ground truth never gives: no answer can pass
    with pytest.raises(ConfigError, match="canonical answer fails"):
        write_function_task(
            tmp_path / "t",
            messages=[{"role": "user", "content": "x"}],
            functions=[ROOM],
            ground_truth=[{"book_room": {}}],
            category="simple",
        )


@pytest.mark.bwrap
def test_loaded_tasks_run_in_the_sandbox(
    bfcl_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    reason = harbor_sandbox_unavailable()
    if reason is not None:
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_BWRAP=1 but {reason}")
        pytest.skip(reason)
    for task in load_bfcl_tasks(tmp_path / "out", "simple", data_dir=bfcl_data):
        limits = trial_limits(load_task(task, bench_root=task.parent).config)
        for solve in (True, False):
            scratch = tmp_path / "runs" / f"{task.name}-{solve}"
            scratch.mkdir(parents=True)
            trial = run_trial(
                task,
                BwrapBackend(),
                limits=limits,
                scratch=scratch,
                agent=TrialAgent(get_agent("oracle" if solve else "null")),
            )
            if solve:
                assert trial.solve is not None and trial.solve.ok, trial.log
            assert trial.reward == (1.0 if solve else 0.0), (task.name, solve, trial.log)


def test_sync_checkers_rewrites_stale_copies(tmp_path: Path) -> None:
    suite = tmp_path / "function-calling"
    shutil.copytree(FC_SUITE, suite)
    stale = suite / "simple-triangle-area" / "tests" / "check.py"
    stale.write_text("# old checker\n")
    assert sync_checkers(suite) == [stale]
    assert stale.read_text() == render_checker()
    assert sync_checkers(suite) == []
