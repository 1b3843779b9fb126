"""JSONata states and workflow variables on the offline Step Functions (docs/offline-cloud.md, gap 36).

Each scenario is a state machine run on moto with localcloud's Step Functions patches (what the offline cloud runs)
and checked against what AWS answers: the outputs and errors the Step Functions developer guide documents, or that
were recorded on AWS (LocalStack's snapshot tests: `$partition`, `$range`, `$parse`, an undefined result's history,
the evaluation order of Assign). The same scenarios run on moto alone, in a fresh process (this file run as a script),
show the gap: moto hands every JSONata expression, and every read of a variable, to a JVM bridge it does not ship.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
ROLE_ARN = "arn:aws:iam::123456789012:role/jsonata"
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
UNPATCHED_TIMEOUT_S = 120.0


# ----------------------------------------------------------------------------------------------------------------
# Scenarios: plain moto + boto3 inside mock_aws; each returns JSON-serialisable observations.
# ----------------------------------------------------------------------------------------------------------------
def _sfn() -> Any:
    return boto3.session.Session(region_name=REGION).client("stepfunctions")


def _run(definition: dict[str, Any], execution_input: Any, name: str | None = None) -> dict[str, Any]:
    """Create a state machine of `definition`, run it on `execution_input` until it ends, and return what
    DescribeExecution shows (output parsed) with the history's events."""
    sfn = _sfn()
    machine = sfn.create_state_machine(
        name=f"m{time.monotonic_ns()}", definition=json.dumps(definition), roleArn=ROLE_ARN
    )["stateMachineArn"]
    started = sfn.start_execution(
        stateMachineArn=machine, input=json.dumps(execution_input), **({"name": name} if name else {})
    )
    deadline = time.monotonic() + 20
    while (described := sfn.describe_execution(executionArn=started["executionArn"]))["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the execution never ended"
        time.sleep(0.02)
    events = sfn.get_execution_history(executionArn=started["executionArn"])["events"]
    return {
        "status": described["status"],
        "output": _value(described["output"]) if "output" in described else None,
        "error": described.get("error"),
        "cause": described.get("cause"),
        "events": [{"type": e["type"], **{k: v for k, v in e.items() if k.endswith("EventDetails")}} for e in events],
    }


def _value(output: str) -> Any:
    """An execution's output. moto writes an output that is a string as the string, where AWS writes its JSON."""
    try:
        return json.loads(output)
    except json.JSONDecodeError:
        return output


def _pass(output: Any) -> dict[str, Any]:
    """A JSONata state machine of one Pass state with `output` as its Output."""
    return {
        "QueryLanguage": "JSONata",
        "StartAt": "P",
        "States": {"P": {"Type": "Pass", "Output": output, "End": True}},
    }


def scenario_arguments_and_result() -> dict[str, Any]:
    """A Task's Arguments built from `$states.input` with a `{% %}` string template, its result read through
    `$states.result` in Output: an SQS message sent by aws-sdk:sqs:sendMessage."""
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    queue = sqs.create_queue(QueueName="jsonata-orders")["QueueUrl"]
    definition = {
        "QueryLanguage": "JSONata",
        "StartAt": "Send",
        "States": {
            "Send": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sqs:sendMessage",
                "Arguments": {
                    "QueueUrl": "{% $states.input.queue %}",
                    "MessageBody": "{% 'order ' & $states.input.order.id & ' for ' & $states.input.order.customer %}",
                },
                "Output": {"sent": "{% $exists($states.result.MessageId) %}", "order": "{% $states.input.order.id %}"},
                "End": True,
            }
        },
    }
    run = _run(definition, {"queue": queue, "order": {"id": "o-7", "customer": "María"}})
    messages = sqs.receive_message(QueueUrl=queue).get("Messages", [])
    return {**run, "bodies": [m["Body"] for m in messages]}


def scenario_states_and_templates() -> dict[str, Any]:
    """`$states.input` and `$states.context` in an Output template: objects and arrays whose strings are evaluated
    when they are `{% ... %}` and kept as they are otherwise."""
    output = {
        "input": "{% $states.input %}",
        "execution": "{% $states.context.Execution.Name %}",
        "state": "{% $states.context.State.Name %}",
        "greeting": "{% 'Hello ' & $states.input.name %}",
        "nested": [1, "{% 1 + 1 %}", {"double": "{% $states.input.n * 2 %}"}],
        "not-evaluated": "$customerName",
        "half-open": "{% not an expression",
    }
    return _run(_pass(output), {"name": "María", "n": 21}, name="greeting-execution")


def scenario_variables() -> dict[str, Any]:
    """Variables assigned in one state and read in later ones. Every reference in a state reads the values the state
    entered with; an Assign's values are there from the next state on."""
    definition = {
        "QueryLanguage": "JSONata",
        "StartAt": "First",
        "States": {
            "First": {
                "Type": "Pass",
                "Assign": {"count": 1, "customer": "{% $states.input.customer %}", "nothing": None},
                "Next": "Second",
            },
            "Second": {
                "Type": "Pass",
                "Assign": {"count": "{% $count + 1 %}", "previous": "{% $count %}"},
                "Output": {"countInSecond": "{% $count %}"},
                "Next": "Third",
            },
            "Third": {
                "Type": "Pass",
                "Output": {
                    "count": "{% $count %}",
                    "previous": "{% $previous %}",
                    "customer": "{% $customer %}",
                    "nothing": "{% $nothing %}",
                    "fromSecond": "{% $states.input.countInSecond %}",
                },
                "End": True,
            },
        },
    }
    return _run(definition, {"customer": "María"})


def scenario_choice() -> dict[str, Any]:
    """A Choice's Condition picks the rule; the matched rule's Assign and Output apply, or the state's own on the
    Default path."""
    definition = {
        "QueryLanguage": "JSONata",
        "StartAt": "Size",
        "States": {
            "Size": {
                "Type": "Choice",
                "Choices": [
                    {
                        "Condition": "{% $states.input.n > 3 %}",
                        "Assign": {"size": "big"},
                        "Output": {"n": "{% $states.input.n %}", "rule": 0},
                        "Next": "Big",
                    }
                ],
                "Default": "Small",
                "Assign": {"size": "small"},
            },
            "Big": {"Type": "Pass", "Output": {"size": "{% $size %}", "input": "{% $states.input %}"}, "End": True},
            "Small": {"Type": "Pass", "Output": {"size": "{% $size %}", "input": "{% $states.input %}"}, "End": True},
        },
    }
    return {"big": _run(definition, {"n": 5}), "small": _run(definition, {"n": 1})}


def scenario_map_and_parallel() -> dict[str, Any]:
    """A Map over `Items` (an expression), its ItemSelector reading `$states.context.Map.Item`, 20 iterations at once
    each reading an outer variable and assigning one of its own; then a Parallel whose branches read the outer
    variables. An inner scope's variables stay inside it."""
    definition = {
        "QueryLanguage": "JSONata",
        "StartAt": "Rate",
        "States": {
            "Rate": {"Type": "Pass", "Assign": {"rate": 3}, "Next": "EachOrder"},
            "EachOrder": {
                "Type": "Map",
                "Items": "{% $states.input.orders[qty > 0] %}",
                "MaxConcurrency": 0,
                "ItemSelector": {
                    "id": "{% $states.context.Map.Item.Value.id %}",
                    "index": "{% $states.context.Map.Item.Index %}",
                    "qty": "{% $states.context.Map.Item.Value.qty %}",
                },
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "Price",
                    "States": {
                        "Price": {"Type": "Pass", "Assign": {"inner": "{% $states.input.id %}"}, "Next": "Total"},
                        "Total": {
                            "Type": "Pass",
                            "Output": {
                                "id": "{% $inner %}",
                                "at": "{% $states.input.index %}",
                                "total": "{% $states.input.qty * $rate %}",
                            },
                            "End": True,
                        },
                    },
                },
                "Assign": {"totals": "{% $states.result.total %}"},
                "Next": "Both",
            },
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {
                        "StartAt": "Sum",
                        "States": {"Sum": {"Type": "Pass", "Output": "{% $sum($totals) %}", "End": True}},
                    },
                    {
                        "StartAt": "Leak",
                        "States": {"Leak": {"Type": "Pass", "Output": "{% $exists($inner) %}", "End": True}},
                    },
                ],
                "Output": {
                    "sum": "{% $states.result[0] %}",
                    "innerSeenOutside": "{% $states.result[1] %}",
                    "totals": "{% $totals %}",
                },
                "End": True,
            },
        },
    }
    orders = [{"id": f"o-{n}", "qty": n % 4} for n in range(27)]  # 20 of them with a quantity
    return _run(definition, {"orders": orders})


def scenario_caught_error() -> dict[str, Any]:
    """An expression that throws in a Task's Arguments: States.QueryEvaluationError, caught by the Task's Catch, whose
    Assign and Output read `$states.errorOutput`."""
    definition = {
        "QueryLanguage": "JSONata",
        "StartAt": "Send",
        "States": {
            "Send": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sqs:sendMessage",
                "Arguments": {"QueueUrl": "unused", "MessageBody": "{% $states.input.quantity + ' items' %}"},
                "Catch": [
                    {
                        "ErrorEquals": ["States.QueryEvaluationError"],
                        "Assign": {"error": "{% $states.errorOutput.Error %}"},
                        "Output": "{% $states.errorOutput %}",
                        "Next": "Report",
                    }
                ],
                "End": True,
            },
            "Report": {
                "Type": "Pass",
                "Output": {"error": "{% $error %}", "caught": "{% $states.input %}"},
                "End": True,
            },
        },
    }
    return _run(definition, {"quantity": 3})


def scenario_uncaught_errors() -> dict[str, Any]:
    """Expressions that fail a state with nothing to catch them: one that returns nothing (recorded on AWS as
    BASE_UNDEFINED_OUTPUT_FIELD), $eval (Step Functions has none: use $parse), and a Fail state's Error and Cause
    computed by expressions."""
    fail = {
        "QueryLanguage": "JSONata",
        "StartAt": "Stop",
        "States": {
            "Stop": {
                "Type": "Fail",
                "Error": "{% 'Order.' & $states.input.why %}",
                "Cause": "{% $string($states.input) %}",
            }
        },
    }
    return {
        "undefined": _run(_pass({"result": "{% $doesNotExist %}"}), {}),
        "eval": _run(_pass({"v": "{% $eval('1 + 1') %}"}), {}),
        "fail": _run(fail, {"why": "Rejected"}),
    }


def scenario_functions() -> dict[str, Any]:
    """Step Functions' own JSONata functions, and two answers jsonata-python, the library used before, got wrong."""
    output = {
        "partition": {
            "fourBy3": "{% $partition([0, 1, 2, 3], 3) %}",
            "oneBy5": "{% $partition([0], 5) %}",
            "twoBy2": "{% $partition([0, 1], 2) %}",
        },
        "range": {
            "0to9by3": "{% $range(0, 9, 3) %}",
            "0to10by3": "{% $range(0, 10, 3) %}",
            "1to9by9": "{% $range(1, 9, 9) %}",
            "1to9by2": "{% $range(1, 9, 2) %}",
        },
        "hash": "{% $hash('abc', 'SHA-256') %}",
        "sameSeedSameNumber": "{% $random(42) = $random(42) %}",
        "random": "{% $random() %}",
        "uuid": "{% $uuid() %}",
        "parse": {
            "minusZero": "{% $parse('-0') %}",
            "number": "{% $parse('1.1') %}",
            "string": "{% $parse('\"HelloWorld\"') %}",
            "object": '{% $parse(\'{"Arg1": 1, "Arg2": []}\') %}',
        },
        "stringOfObject": "{% $string({'name': 'María'}) %}",
        "remainder": "{% 7.5 % 2 %}",
    }
    return _run(_pass(output), {})


def scenario_now() -> dict[str, Any]:
    """`$now()` in two executions of one definition (the expression compiled once): each is its own evaluation's time,
    at or after its execution's start."""
    definition = _pass({"now": "{% $now() %}", "started": "{% $states.context.Execution.StartTime %}"})
    return {"first": _run(definition, {}), "second": _run(definition, {})}


def scenario_jsonpath_variables() -> dict[str, Any]:
    """Variables in JSONPath states: `$name` and `$name.path` in a `.$` field, an intrinsic's argument and a Choice's
    Variable; and the evaluation order recorded on AWS (BASE_EVALUATION_ORDER_PASS_STATE): a state's OutputPath reads
    the variable it entered with, not the one its own Assign sets."""
    reads = {
        "StartAt": "Set",
        "States": {
            "Set": {"Type": "Pass", "Assign": {"x.$": "$.a", "obj": {"k": [10, 20]}}, "Next": "Read"},
            "Read": {
                "Type": "Pass",
                "Parameters": {"x.$": "$x", "k.$": "$obj.k[1]", "f.$": "States.Format('x={}', $x)"},
                "Next": "Branch",
            },
            "Branch": {
                "Type": "Choice",
                "Choices": [{"Variable": "$x", "NumericEquals": 7, "Next": "Seven"}],
                "Default": "Other",
            },
            "Seven": {"Type": "Pass", "End": True},
            "Other": {"Type": "Fail", "Error": "NotSeven"},
        },
    }
    order = {
        "StartAt": "State0",
        "States": {
            "State0": {
                "Type": "Pass",
                "Result": {"theQuestion": "What is the answer to life the universe and everything?"},
                "Assign": {"question.$": "$.theQuestion", "answer": 42},
                "Next": "State1",
            },
            "State1": {
                "Type": "Pass",
                "InputPath": "$answer",
                "ResultPath": "$.theAnswer",
                "OutputPath": "$answer",
                "Assign": {"answer": "<omitted>"},
                "End": True,
            },
        },
    }
    return {"reads": _run(reads, {"a": 7}), "order": _run(order, {})}


def scenario_failed_state_assigns_nothing() -> dict[str, Any]:
    """A Task that fails after its Assign was evaluated (its ResultPath cannot be applied to its input), caught: its own
    Assign is not applied, its Catcher's is."""
    definition = {
        "StartAt": "List",
        "States": {
            "List": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sqs:listQueues",
                "Parameters": {},
                "Assign": {"listed": True},
                "ResultPath": "$.text.queues",
                "Catch": [
                    {
                        "ErrorEquals": ["States.ALL"],
                        "Assign": {"caught": True},
                        "ResultPath": "$.error",
                        "Next": "Report",
                    }
                ],
                "End": True,
            },
            "Report": {
                "Type": "Pass",
                "QueryLanguage": "JSONata",
                "Output": {"listed": "{% $exists($listed) %}", "caught": "{% $caught %}"},
                "End": True,
            },
        },
    }
    return _run(definition, {"text": "not an object"})


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    "arguments_and_result": scenario_arguments_and_result,
    "states_and_templates": scenario_states_and_templates,
    "variables": scenario_variables,
    "choice": scenario_choice,
    "map_and_parallel": scenario_map_and_parallel,
    "caught_error": scenario_caught_error,
    "uncaught_errors": scenario_uncaught_errors,
    "functions": scenario_functions,
    "now": scenario_now,
    "failed_state_assigns_nothing": scenario_failed_state_assigns_nothing,
    "jsonpath_variables": scenario_jsonpath_variables,
}


def run_scenarios() -> dict[str, Any]:
    with mock_aws(config=MOTO_CONFIG):
        return {name: scenario() for name, scenario in SCENARIOS.items()}


# ----------------------------------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def unpatched() -> dict[str, Any]:
    """Every scenario on moto alone: this file run as a script, in a process that never imports localcloud."""
    done = subprocess.run(
        [sys.executable, __file__], cwd=REPO, capture_output=True, text=True, timeout=UNPATCHED_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture
def patched() -> Iterator[None]:
    from localcloud.fixes import patches

    with patches.Patches(patches.step_functions()), mock_aws(config=MOTO_CONFIG):
        yield


def failure(run: dict[str, Any]) -> dict[str, Any]:
    """An ended execution's status, error and cause."""
    return {key: run[key] for key in ("status", "error", "cause")}


# ----------------------------------------------------------------------------------------------------------------
# With the fix: moto with localcloud's Step Functions patches, as the offline cloud runs it
# ----------------------------------------------------------------------------------------------------------------
def test_a_tasks_arguments_are_built_from_its_input_and_its_output_from_its_result(patched: None) -> None:
    run = scenario_arguments_and_result()
    assert run["status"] == "SUCCEEDED", failure(run)
    assert run["bodies"] == ["order o-7 for María"]
    assert run["output"] == {"sent": True, "order": "o-7"}


def test_states_input_and_context_fill_a_template_and_other_strings_stay_literal(patched: None) -> None:
    run = scenario_states_and_templates()
    assert run["output"] == {
        "input": {"name": "María", "n": 21},
        "execution": "greeting-execution",
        "state": "P",
        "greeting": "Hello María",
        "nested": [1, 2, {"double": 42}],
        "not-evaluated": "$customerName",
        "half-open": "{% not an expression",
    }


def test_variables_are_read_as_the_state_entered_with_them_and_set_for_the_next(patched: None) -> None:
    run = scenario_variables()
    assert run["status"] == "SUCCEEDED", failure(run)
    # Second's Output and its `previous` read count as Second entered with it (1); Third reads Second's 2
    assert run["output"] == {"count": 2, "previous": 1, "customer": "María", "nothing": None, "fromSecond": 1}
    # And each state's exit reports what it assigned (AWS's assignedVariables, values as JSON text)
    exits = [e["stateExitedEventDetails"] for e in run["events"] if e["type"] == "PassStateExited"]
    assert [e.get("assignedVariables") for e in exits] == [
        {"count": "1", "customer": '"María"', "nothing": "null"},
        {"count": "2", "previous": "1"},
        None,
    ]


def test_a_choice_condition_picks_its_rule_and_the_rules_assign_and_output_apply(patched: None) -> None:
    runs = scenario_choice()
    assert runs["big"]["output"] == {"size": "big", "input": {"n": 5, "rule": 0}}
    assert runs["small"]["output"] == {"size": "small", "input": {"n": 1}}


def test_map_items_and_parallel_branches_read_outer_variables_and_keep_their_own(patched: None) -> None:
    run = scenario_map_and_parallel()
    assert run["status"] == "SUCCEEDED", failure(run)
    kept = [n for n in range(27) if n % 4]
    totals = [(n % 4) * 3 for n in kept]
    assert run["output"] == {"sum": sum(totals), "innerSeenOutside": False, "totals": totals}
    iterations = [e for e in run["events"] if e["type"] == "MapIterationSucceeded"]
    assert len(iterations) == len(kept) == 20


def test_an_expression_that_throws_is_a_query_evaluation_error_a_catch_catches(patched: None) -> None:
    run = scenario_caught_error()
    assert run["status"] == "SUCCEEDED", failure(run)
    assert run["output"]["error"] == "States.QueryEvaluationError"
    assert run["output"]["caught"]["Error"] == "States.QueryEvaluationError"
    assert (
        "The JSONata expression '$states.input.quantity + ' items'' specified for the field 'Arguments/MessageBody' "
        "threw an error during evaluation. T2002: " in run["output"]["caught"]["Cause"]
    )


def test_an_expression_that_returns_nothing_fails_the_execution_as_recorded_on_aws(patched: None) -> None:
    run = scenario_uncaught_errors()["undefined"]
    cause = (
        "An error occurred while executing the state 'P' (entered at the event id #2). The JSONata expression "
        "'$doesNotExist' specified for the field 'Output/result' returned nothing (undefined)."
    )
    assert [e["type"] for e in run["events"]] == [
        "ExecutionStarted",
        "PassStateEntered",
        "EvaluationFailed",
        "ExecutionFailed",
    ]
    assert run["events"][2]["evaluationFailedEventDetails"] == {
        "error": "States.QueryEvaluationError",
        "cause": cause,
        "location": "Output/result",
        "state": "P",
    }
    assert failure(run) == {"status": "FAILED", "error": "States.QueryEvaluationError", "cause": cause}


def test_eval_is_not_there_and_a_fail_states_error_and_cause_are_expressions(patched: None) -> None:
    runs = scenario_uncaught_errors()
    assert runs["eval"]["status"] == "FAILED"
    assert runs["eval"]["error"] == "States.QueryEvaluationError"
    assert "threw an error during evaluation. T1006: " in runs["eval"]["cause"]
    assert failure(runs["fail"]) == {"status": "FAILED", "error": "Order.Rejected", "cause": '{"why":"Rejected"}'}


def test_step_functions_functions_answer_as_aws_does(patched: None) -> None:
    run = scenario_functions()
    assert run["status"] == "SUCCEEDED", failure(run)
    output = run["output"]
    # $partition, $range and $parse as recorded on AWS
    assert output["partition"] == {"fourBy3": [[0, 1, 2], [3]], "oneBy5": [[0]], "twoBy2": [[0, 1]]}
    # a range of one number is that number
    assert output["range"] == {
        "0to9by3": [0, 3, 6, 9],
        "0to10by3": [0, 3, 6, 9],
        "1to9by9": 1,
        "1to9by2": [1, 3, 5, 7, 9],
    }
    assert output["parse"] == {"minusZero": 0, "number": 1.1, "string": "HelloWorld", "object": {"Arg1": 1, "Arg2": []}}
    assert output["hash"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert output["sameSeedSameNumber"] is True
    assert 0 <= output["random"] < 1
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", output["uuid"])
    # And as jsonata-js answers: $string keeps non-ASCII characters, `%` keeps the fraction
    assert output["stringOfObject"] == '{"name":"María"}'
    assert output["remainder"] == 1.5


def test_now_is_each_evaluations_own_time(patched: None) -> None:
    runs = scenario_now()
    for run in runs.values():
        now, started = (datetime.fromisoformat(run["output"][key]) for key in ("now", "started"))
        assert now >= started, run["output"]


def test_jsonpath_states_read_variables_and_a_states_own_assign_takes_effect_as_it_exits(patched: None) -> None:
    runs = scenario_jsonpath_variables()
    assert runs["reads"]["status"] == "SUCCEEDED", failure(runs["reads"])
    assert runs["reads"]["output"] == {"x": 7, "k": 20, "f": "x=7"}
    assert runs["order"]["output"] == 42  # as recorded on AWS


def test_a_state_that_fails_after_its_assign_assigns_nothing_and_its_catcher_does(patched: None) -> None:
    run = scenario_failed_state_assigns_nothing()
    assert run["output"] == {"listed": False, "caught": True}


def test_moto_with_the_jsonata_fix_alone_applies_an_assign_within_its_own_state() -> None:
    # Given moto with every Step Functions fix but the assignments held until the state exits
    from localcloud.fixes import jsonata, patches

    on_exit = (jsonata.assign_on_exit, jsonata.exit_with_assignments, jsonata.catch_without_own_assignments)
    fixes = [patch for patch in patches.step_functions() if not any(patch.replacement is f for f in on_exit)]
    with patches.Patches(fixes), mock_aws(config=MOTO_CONFIG):
        order = scenario_jsonpath_variables()["order"]
        failed = scenario_failed_state_assigns_nothing()
    # Then State1's OutputPath reads the value its own Assign set, where AWS reads the one it entered with (42)
    assert order["output"] == "<omitted>"
    # And a state that failed after its Assign still assigned
    assert failed["output"] == {"listed": True, "caught": True}


# ----------------------------------------------------------------------------------------------------------------
# Without the fix: moto alone (a fresh process); a failure here means moto changed underneath
# ----------------------------------------------------------------------------------------------------------------
def test_unpatched_moto_fails_every_jsonata_state_and_every_variable_read(unpatched: dict[str, Any]) -> None:
    runs = [
        unpatched["arguments_and_result"],
        unpatched["states_and_templates"],
        unpatched["variables"],
        *unpatched["choice"].values(),
        unpatched["map_and_parallel"],
        unpatched["caught_error"],
        *unpatched["uncaught_errors"].values(),
        unpatched["functions"],
        *unpatched["now"].values(),
        unpatched["failed_state_assigns_nothing"],
        *unpatched["jsonpath_variables"].values(),
    ]
    assert {run["status"] for run in runs} == {"FAILED"}
    assert {run["error"] for run in runs} == {"States.Runtime"}
    assert all("'NoneType' object is not callable" in run["cause"] for run in runs), [r["cause"] for r in runs]
    assert unpatched["arguments_and_result"]["bodies"] == []


if __name__ == "__main__":
    # The unpatched probe: `python test_jsonata.py` prints every scenario's observations as one JSON line.
    print(json.dumps(run_scenarios(), default=str))
