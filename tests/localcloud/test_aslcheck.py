"""Behaviour of `python -m localcloud.aslcheck`: what a developer sees for good and broken ASL files."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from localcloud.aslcheck import check_file, main

REPO = Path(__file__).resolve().parents[2]

# A callback flow using Parallel, Map, Choice and Catch, with DefinitionSubstitutions placeholders
# exactly as a statemachines/*.asl.json file in a SAM app carries them.
VALID: dict[str, Any] = {
    "Comment": "Callback flow",
    "StartAt": "Validate",
    "States": {
        "Validate": {
            "Type": "Task",
            "Resource": "${ValidateFunctionArn}",
            "TimeoutSeconds": 30,
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Failed"}],
            "Next": "Route",
        },
        "Route": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.kind", "StringEquals": "batch", "Next": "FanOut"}],
            "Default": "RecordAndWait",
        },
        "FanOut": {
            "Type": "Map",
            "ItemsPath": "$.items",
            "ItemProcessor": {
                "StartAt": "AskForApproval",
                "States": {
                    "AskForApproval": {
                        "Type": "Task",
                        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                        "Parameters": {"QueueUrl": "${CallbackQueueUrl}", "MessageBody": {"token.$": "$$.Task.Token"}},
                        "End": True,
                    }
                },
            },
            "Next": "Done",
        },
        "RecordAndWait": {
            "Type": "Parallel",
            "Branches": [
                {
                    "StartAt": "Record",
                    "States": {
                        "Record": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::dynamodb:putItem",
                            "Parameters": {"TableName": "${TableName}", "Item": {"pk": {"S.$": "$.id"}}},
                            "End": True,
                        }
                    },
                },
                {"StartAt": "Pause", "States": {"Pause": {"Type": "Wait", "Seconds": 1, "End": True}}},
            ],
            "Next": "Done",
        },
        "Done": {"Type": "Succeed"},
        "Failed": {"Type": "Fail", "Error": "ValidationFailed"},
    },
}


def write(tmp_path: Path, definition: dict[str, Any], name: str = "flow.asl.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(definition, indent=2))
    return path


def broken(change: Any) -> dict[str, Any]:
    """A copy of VALID with one mistake made by `change(states)`."""
    definition = copy.deepcopy(VALID)
    change(definition["States"])
    return definition


def lines_from(path: Path, check: str) -> list[str]:
    return [line for line in check_file(path) if f": {check}: " in line]


def test_a_valid_definition_with_placeholders_passes_all_three_checks(tmp_path: Path) -> None:
    # Given a definition with Parallel, Map, Choice and Catch whose Resource is a `${...Arn}` placeholder
    path = write(tmp_path, VALID)
    # When it is checked
    problems = check_file(path)
    # Then schema, moto and graph checks all accept it
    assert problems == []


def test_a_next_pointing_nowhere_is_reported_by_the_graph_check(tmp_path: Path) -> None:
    # Given a Task whose Next names a state that does not exist
    path = write(tmp_path, broken(lambda s: s["Validate"].update(Next="Rout")))
    # When it is checked
    problems = lines_from(path, "graph")
    # Then the graph check names the state and the missing target
    assert f"{path}: Validate: graph: Next target 'Rout' does not exist" in problems


def test_a_state_nothing_leads_to_is_reported_as_unreachable(tmp_path: Path) -> None:
    # Given a state that no Next, Default, Choice or Catch points at
    path = write(tmp_path, broken(lambda s: s.update(Orphan={"Type": "Pass", "End": True})))
    # When it is checked
    problems = lines_from(path, "graph")
    # Then only that state is reported, as unreachable from StartAt
    assert problems == [f"{path}: Orphan: graph: unreachable from StartAt 'Validate'"]


def test_a_catch_to_a_missing_state_is_reported_on_the_catching_state(tmp_path: Path) -> None:
    # Given a Catch that sends errors to a state that does not exist
    path = write(tmp_path, broken(lambda s: s["Validate"]["Catch"][0].update(Next="Fail")))
    # When it is checked
    problems = lines_from(path, "graph")
    # Then the graph check names the catching state and the Catch entry
    assert f"{path}: Validate: graph: Catch[0].Next target 'Fail' does not exist" in problems


def test_problems_inside_a_map_processor_or_parallel_branch_name_the_inner_state(tmp_path: Path) -> None:
    # Given a Map processor state with neither Next nor End, and a Parallel branch whose StartAt is wrong
    def change(states: dict[str, Any]) -> None:
        del states["FanOut"]["ItemProcessor"]["States"]["AskForApproval"]["End"]
        states["RecordAndWait"]["Branches"][1]["StartAt"] = "Sleep"

    path = write(tmp_path, broken(change))
    # When it is checked
    problems = lines_from(path, "graph")
    # Then each is reported in its own scope
    assert f"{path}: AskForApproval: graph: has neither Next nor End: true" in problems
    assert f"{path}: RecordAndWait: graph: StartAt 'Sleep' is not a state in this scope" in problems


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("Type", "Tasks", "schema: Type: 'Tasks' is not one of"),
        ("TimeoutSeconds", "30", "schema: TimeoutSeconds: '30' is not of type 'number'"),
    ],
)
def test_a_field_the_asl_schema_rejects_is_reported_by_the_schema_check(
    tmp_path: Path, field: str, value: str, expected: str
) -> None:
    # Given a Task with a misspelt state type or a quoted number
    path = write(tmp_path, broken(lambda s: s["Validate"].update({field: value})))
    # When it is checked
    problems = lines_from(path, "schema")
    # Then the schema check names the state and the field
    assert any(line.startswith(f"{path}: Validate: {expected}") for line in problems), problems


def test_an_integration_moto_cannot_run_is_reported_by_the_moto_check(tmp_path: Path) -> None:
    # Given a Task whose service integration is misspelt, which the schema's ARN pattern still accepts
    path = write(tmp_path, broken(lambda s: s["Validate"].update(Resource="arn:aws:states:::lamda:invoke")))
    # When it is checked
    problems = check_file(path)
    # Then only moto's parser objects, naming the state
    assert problems == [f"{path}: Validate: moto: RecognitionException: Unknown service 'lamda'"]


def test_a_problem_nested_in_a_branch_is_pinned_on_that_state_by_the_moto_check(tmp_path: Path) -> None:
    # Given a Wait inside a Parallel branch that sets both Seconds and Timestamp, which moto cannot run
    def change(states: dict[str, Any]) -> None:
        states["RecordAndWait"]["Branches"][1]["States"]["Pause"]["Timestamp"] = "2030-01-01T00:00:00Z"

    path = write(tmp_path, broken(change))
    # When it is checked
    problems = lines_from(path, "moto")
    # Then the inner state, not the Parallel, is named
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}: Pause: moto: ValueError: Redefinition of type")


def test_the_command_exits_0_when_clean_and_1_with_one_line_per_problem(tmp_path: Path) -> None:
    # Given one clean file and one with a missing Next target
    clean = write(tmp_path, VALID, "clean.asl.json")
    bad = write(tmp_path, broken(lambda s: s["Validate"].update(Next="Nowhere")), "bad.asl.json")
    command = [sys.executable, "-m", "localcloud.aslcheck"]
    # When the command runs on each
    ok = subprocess.run([*command, str(clean)], cwd=REPO, capture_output=True, text=True, check=False)
    failed = subprocess.run([*command, str(clean), str(bad)], cwd=REPO, capture_output=True, text=True, check=False)
    # Then the clean run is silent with exit 0, and the failing one prints `path: State: message` and exits 1
    assert (ok.returncode, ok.stdout) == (0, "")
    assert failed.returncode == 1
    assert failed.stdout.splitlines() == [f"{bad}: Validate: graph: Next target 'Nowhere' does not exist"]


def test_the_command_without_files_prints_one_line_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    # Given no files / When the command runs / Then one line on stderr says what is missing and where usage is; exit 2
    code = main([])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    assert "python -m localcloud.aslcheck: the following arguments are required: FILE" in error
    assert "--help` for usage" in error


def test_a_file_that_is_not_json_is_one_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a file with a trailing comma
    path = tmp_path / "broken.asl.json"
    path.write_text('{"StartAt": "A",}')
    # When the command runs on it
    code = main([str(path)])
    # Then it exits 1 with one line saying the JSON cannot be read
    assert code == 1
    assert capsys.readouterr().out.startswith(f"{path}: (top level): cannot read JSON:")


@pytest.mark.parametrize(("value", "problems"), [("{% $states.input.wait %}", 0), ("30", 1)])
def test_a_jsonata_task_may_compute_its_timeout_but_not_quote_a_number(
    tmp_path: Path, value: str, problems: int
) -> None:
    # Given a JSONata Task whose TimeoutSeconds and HeartbeatSeconds are expressions (AWS evaluates them as the state
    # starts; cfn-lint's JSONata schema takes only numbers there), or quoted numbers
    task = {"Type": "Task", "Resource": "${WorkFunctionArn}", "TimeoutSeconds": value, "HeartbeatSeconds": value}
    definition = {"QueryLanguage": "JSONata", "StartAt": "Work", "States": {"Work": {**task, "End": True}}}
    # When it is checked
    found = lines_from(write(tmp_path, definition), "schema")
    # Then an expression passes, and a quoted number is still refused, for each field
    assert len(found) == problems * 2, found
