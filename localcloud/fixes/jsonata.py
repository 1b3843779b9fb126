"""Gap 36: JSONata and workflow variables, evaluated offline (docs/offline-cloud.md).

moto 5.2.5 hands every JSONata expression to a JVM bridge it does not ship (`eval_jsonata_expression` calls a function
it set to None), so every JSONata state failed with `'NoneType' object is not callable`, and so did every read of a
variable in a JSONPath state (`"x.$": "$name"`), which moto evaluates as JSONata too. Here both are evaluated in
Python:

- JSONata by jsonata-python (a port of jsonata-js, by way of the jsonata-java that moto's bridge was written for).
  Measured against JSONata 2.0.6, the version Step Functions implements: 96.4 % of its own test suite exactly, 99.4 %
  counting any error where one is expected (which is all Step Functions sees: every error is
  States.QueryEvaluationError). Each expression text is compiled once, and `$states` and the variables are bound as
  values, where moto wrote them into the expression's text as JSON and compiled that for every evaluation: 20-50
  microseconds a field with a 1,000-item input, where moto's way took 105-125 ms.
- A JSONPath state's `$name.path` as AWS reads it: the variable, then the rest as a JSONPath on its value.

What AWS answers is kept (recorded by LocalStack's snapshot tests against AWS; the functions as the Step Functions
developer guide, "Transforming data with JSONata", documents them):
- an expression that returns nothing, or throws, fails the state with States.QueryEvaluationError, an EvaluationFailed
  event naming the field (`location`, e.g. `Output/result`), and the cause "The JSONata expression '<expr>'
  specified for the field '<location>' returned nothing (undefined)." or "... threw an error during evaluation.
  <code>: <message>";
- Step Functions' own functions: $partition, $range, $hash, $random (with an optional seed), $uuid, $parse; $eval is not
  there (AWS: use $parse), so calling it fails as a call of any name that is not a function does (T1006).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import random
import re
import uuid
from collections.abc import Callable
from typing import Any

from jsonata import Jsonata, Utils
from jsonata.functions import Functions
from jsonata.parser import Parser
from moto.stepfunctions.parser.api import EvaluationFailedEventDetails, HistoryEventType
from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
from moto.stepfunctions.parser.asl.component.common.string.string_expression import (
    StringJSONata,
    StringVariableSample,
)
from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
from moto.stepfunctions.parser.asl.component.state.state import CommonStateField
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.eval.variable_store import IllegalOuterScopeWrite, VariableStore
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
from moto.stepfunctions.parser.asl.utils.json_path import extract_json

from localcloud import moto_state

# --- Step Functions' own JSONata functions --------------------------------------------------------------------------
_HASHES: dict[str, Callable[[bytes], Any]] = {
    "MD5": hashlib.md5,
    "SHA-1": hashlib.sha1,
    "SHA-256": hashlib.sha256,
    "SHA-384": hashlib.sha384,
    "SHA-512": hashlib.sha512,
}


def _partition(array: list[Any], size: int) -> list[list[Any]]:
    """$partition(array, chunkSize): the array in chunks of `size`, the last one shorter (AWS: `[0,1,2,3]` by 3 is
    `[[0,1,2],[3]]`, `[0]` by 5 is `[[0]]`)."""
    if not isinstance(array, list) or not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError("$partition takes an array and a chunk size of at least 1")
    return [array[start : start + size] for start in range(0, len(array), size)]


def _range(first: int, last: int, step: int) -> list[Any]:
    """$range(start, end, step): start, start + step, ... up to end included (AWS: `$range(0, 10, 3)` is `[0,3,6,9]`).
    A JSONata sequence, as AWS answers it: a range of one number is that number (`$range(1, 9, 9)` is `1`)."""
    if step == 0:
        raise ValueError("$range takes a step other than 0")
    count = math.floor((last - first) / step) + 1
    if count < 1:
        return []  # a step away from the end: an empty array, as moto's own $range answered
    return Utils.create_sequence_from_iter(Utils.convert_number(first + index * step) for index in range(count))


def _hash(value: str, algorithm: str) -> str:
    """$hash(value, algorithm): the hex digest of the UTF-8 string, by MD5, SHA-1, SHA-256, SHA-384 or SHA-512."""
    if not isinstance(value, str) or algorithm not in _HASHES:
        raise ValueError(f"$hash takes a string and one of {', '.join(_HASHES)}")
    return str(_HASHES[algorithm](value.encode()).hexdigest())


def _random(seed: int | None = None) -> float:
    """$random([seed]): a number n with 0 <= n < 1; the same seed gives the same number (not AWS's number: its
    generator is not documented)."""
    return random.Random(seed).random() if seed is not None else random.random()


def _parse(text: str) -> Any:
    """$parse(jsonString): the JSON value of a string (AWS's replacement for $eval). JSON null is JSONata null."""
    if not isinstance(text, str):
        raise ValueError("$parse takes a string")
    value = json.loads(text, parse_constant=_no_constant)
    return Utils.NULL_VALUE if value is None else value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Bound under each evaluation's variables, as Step Functions provides them; `eval` bound to nothing hides JSONata's.
_FUNCTIONS: dict[str, Any] = {
    "partition": Jsonata.JLambda(_partition),
    "range": Jsonata.JLambda(_range),
    "hash": Jsonata.JLambda(_hash),
    "random": Jsonata.JLambda(_random),
    "uuid": Jsonata.JLambda(lambda: str(uuid.uuid4())),
    "parse": Jsonata.JLambda(_parse),
    "eval": None,
}


# --- evaluation -------------------------------------------------------------------------------------------------------
class _Undefined(Exception):
    """The expression returned nothing (JSONata's undefined), which JSON cannot hold."""


class _Unsupported(Exception):
    """The expression returned what is not JSON (a function)."""


@functools.lru_cache(maxsize=4096)
def _compiled(text: str) -> Jsonata:
    """One parse per expression text (a parse error is raised each time). Evaluation never changes the parsed tree,
    so threads share it; two threads compiling one text at once build it twice, harmlessly."""
    expression = Jsonata(text)
    expression.set_output_convert_nulls(False)  # JSON null (NULL_VALUE) and undefined (None) kept apart
    return expression


def _evaluate(text: str, bindings: dict[str, Any]) -> Any:
    """The JSON value of `text` with `bindings` as its variables. Raises what the expression throws, `_Undefined` or
    `_Unsupported`."""
    # jsonata-python keeps an evaluation's scratch state and its $now()/$millis() timestamp on the instance it finds
    # in a thread-local (`Jsonata.CURRENT`), which compiling sets and evaluating does not: each evaluation gets a copy
    # of its own (sharing the parsed tree) as its thread's current one, so a cached expression reads its own clock and
    # no two threads share scratch state.
    evaluation = copy.copy(_compiled(text))
    Jsonata.CURRENT.jsonata = evaluation
    result = evaluation.evaluate(None, bindings)
    if result is None:
        raise _Undefined
    return _json(result)


def _json(value: Any) -> Any:
    """A plain JSON value of a result: lists and dicts copied (a path's result is the bound input's own object),
    JSONata null as None."""
    if value is Utils.NULL_VALUE or value is None:  # None inside a result is a null of the bound input
        return None
    if isinstance(value, dict):
        return {key: _json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json(item) for item in value]
    if isinstance(value, (str, int, float)):
        return value
    raise _Unsupported


def _bindings(env: Environment) -> dict[str, Any]:
    """What an expression sees: Step Functions' functions, the variables in scope (inner over outer) and `$states`
    (input, context, result, errorOutput: moto's own `States` data, not copied: evaluation only reads it). A
    variable holding null is bound as JSONata null (a top-level None would be undefined)."""
    variables = moto_state.variables(env.variable_store)
    return {
        **_FUNCTIONS,
        **{name: Utils.NULL_VALUE if value is None else value for name, value in variables.items()},
        "states": env.states._states_data,
    }


def _fail(env: Environment, location: str, cause: str) -> FailureEventException:
    """States.QueryEvaluationError, recorded as AWS records it: an EvaluationFailed event naming the field, then the
    state's failure (which a Catch on States.QueryEvaluationError or States.ALL catches). Known difference: a Task,
    Map or Parallel state also records, as moto's ExecutionState does for every failure it catches, a second
    EvaluationFailed event for a field it evaluates itself (Arguments, Assign, Items, ...), without AWS's opening
    sentence; the execution's status, error and cause, and the Catch, are AWS's."""
    error = StatesErrorNameType.StatesQueryEvaluationError.to_name()
    failure = FailureEventException(
        failure_event=FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=StatesErrorNameType.StatesQueryEvaluationError),
            event_type=HistoryEventType.EvaluationFailed,
            event_details=EventDetails(
                evaluationFailedEventDetails=EvaluationFailedEventDetails(error=error, cause=cause, location=location)
            ),
        )
    )
    env.event_manager.add_event(
        context=env.event_history_context,
        event_type=HistoryEventType.EvaluationFailed,
        event_details=EventDetails(evaluationFailedEventDetails=failure.get_evaluation_failed_event_details()),
    )
    return failure


def string_jsonata_eval(self: StringJSONata, env: Environment) -> None:
    """In place of `StringJSONata._eval_body`: every `{% %}` expression of a JSONata state (Arguments, Output, Assign,
    Condition, Items, Seconds, TimeoutSeconds, ...) evaluated, its value pushed for the field that holds it."""
    expression = f"The JSONata expression '{self.expression}' specified for the field '{self.location}'"
    try:
        value = _evaluate(self.expression, _bindings(env))
    except _Undefined:
        raise _fail(env, self.location, f"{expression} returned nothing (undefined).") from None
    except _Unsupported:
        raise _fail(env, self.location, f"{expression} returned an unsupported result type.") from None
    except Exception as thrown:  # noqa: BLE001 - whatever the expression throws is the state's QueryEvaluationError
        code = getattr(thrown, "error", None)
        detail = f". {code}: {thrown}" if code else f": {thrown}"
        raise _fail(env, self.location, f"{expression} threw an error during evaluation{detail}") from None
    env.stack.append(value)


_VARIABLE_SAMPLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)(.*)", re.DOTALL)


def variable_sample_eval(self: StringVariableSample, env: Environment) -> None:
    """In place of `StringVariableSample._eval_body`: a JSONPath state's `$name` or `$name.path` (in a `.$` field, a
    Choice's Variable or `...Path`, an intrinsic's argument) is the variable, then the rest of the path as JSONPath on
    its value (AWS: "$customerName", "$product.details.price"). A variable not in scope is moto's NoSuchVariable."""
    name, path = _VARIABLE_SAMPLE.fullmatch(self.expression).groups()  # type: ignore[union-attr] # the lexer's shape
    value = env.variable_store.get(name)
    env.stack.append(copy.deepcopy(extract_json(f"${path}", value) if path else value))


# --- variables: a state's assignments take effect as it exits -------------------------------------------------------
_moto_state_exited_details = CommonStateField._get_state_exited_event_details
_moto_handle_catch = ExecutionState._handle_catch


def assign_on_exit(self: VariableStore, variable_identifier: str, variable_value: Any) -> None:
    """In place of `VariableStore.set`: an Assign's value is kept aside until its state exits. AWS: every reference in
    a state reads the variables as they were when it entered (a state with `"Assign": {"answer": "<omitted>"}` and
    `"OutputPath": "$answer"` outputs the answer it entered with, 42, as recorded on AWS), and the values are there
    from the next state on. moto wrote them at once, so the state's own Output, OutputPath and ResultPath read the new
    ones. An outer scope's variable is still refused, as moto did."""
    if variable_identifier in self._outer_scope:
        raise IllegalOuterScopeWrite(variable_identifier=variable_identifier, variable_value=variable_value)
    self._declaration_tracing.add(variable_identifier)
    vars(self).setdefault("assigned", {})[variable_identifier] = variable_value


def exit_with_assignments(self: CommonStateField, env: Environment) -> Any:
    """In place of `CommonStateField._get_state_exited_event_details`: the state's assignments take effect, then its
    exit event reports them (`assignedVariables`), as moto's did."""
    store = env.variable_store
    store._inner_scope.update(vars(store).pop("assigned", {}))
    return _moto_state_exited_details(self, env)


def catch_without_own_assignments(self: ExecutionState, env: Environment, failure_event: FailureEvent) -> None:
    """In place of `ExecutionState._handle_catch`: a state that failed after its Assign was evaluated (its
    ResultSelector or a later field threw) assigns nothing; a Catcher's own Assign then applies, as on AWS."""
    vars(env.variable_store).pop("assigned", None)
    env.variable_store.reset_tracing()
    _moto_handle_catch(self, env, failure_event)


# --- the field an expression sits in (its EvaluationFailed `location`) ------------------------------------------------
_moto_visit_string_jsonata = Preprocessor.visitString_jsonata


def visit_string_jsonata(self: Preprocessor, ctx: ASLParser.String_jsonataContext) -> StringJSONata:
    """In place of `Preprocessor.visitString_jsonata`: the parsed expression also keeps where it sits in its state, as
    AWS names it in an evaluation error's `location`: `Output`, `Output/result`, `Arguments/FunctionName`,
    `Assign/x`, `Choices[0]/Condition`, `Catch[1]/Output`, `Items`."""
    string_jsonata = _moto_visit_string_jsonata(self, ctx)
    string_jsonata.location = _location(ctx)
    return string_jsonata


def _location(ctx: Any) -> str:
    """The JSON keys and array indexes from the expression up to its state, read from the parse tree: a `"key": value`
    node (three or more children, the second a colon) names a key; a node inside a `[...]` has the index of its
    element (the commas before it)."""
    path = ""
    node = ctx
    while not isinstance(node, ASLParser.State_declContext):
        parent = node.parentCtx
        children = [child.getText() for child in node.children or ()]
        if len(children) >= 3 and children[1] == ":" and node is not ctx:
            path = f"/{json.loads(children[0])}{path}"
        siblings = [child.getText() for child in parent.children or ()]
        if "[" in siblings:
            index = parent.children.index(node)
            path = f"[{siblings[siblings.index('[') : index].count(',')}]{path}"
        node = parent
    return path.lstrip("/")


# --- jsonata-python where it differs from jsonata-js -----------------------------------------------------------------
def string_unescaped(arg: Any, prettify: bool) -> str:
    """In place of jsonata-python's `Functions._string` (the same but for `ensure_ascii`): $string of an object or array
    is JSON.stringify's text, its non-ASCII characters as they are (jsonata-python escaped them: `"Mar\\u00eda"`
    where AWS gives `"María"`)."""
    if isinstance(arg, (Jsonata.JFunction, Parser.Symbol)):
        return ""
    if prettify:
        return json.dumps(arg, cls=Functions.Encoder, indent="  ", ensure_ascii=False)
    return json.dumps(arg, cls=Functions.Encoder, separators=(",", ":"), ensure_ascii=False)


_jsonata_numeric = Jsonata.evaluate_numeric_expression


def numeric_with_float_remainder(self: Jsonata, lhs: Any, rhs: Any, op: str) -> Any:
    """In place of jsonata-python's `Jsonata.evaluate_numeric_expression`: `%` of numbers keeps the fraction, as
    JavaScript's does (jsonata-python truncated it: `0.5 % 2` was 0, not 0.5)."""
    if op == "%" and Utils.is_numeric(lhs) and Utils.is_numeric(rhs):
        return Utils.convert_number(math.fmod(float(lhs), float(rhs)))
    return _jsonata_numeric(self, lhs, rhs, op)
