"""Gap 36: JSONata and workflow variables, evaluated offline (docs/offline-cloud.md).

moto 5.2.5 hands every JSONata expression to a JVM bridge it does not ship (`eval_jsonata_expression` calls a function
it set to None), so every JSONata state failed with `'NoneType' object is not callable`, and so did every read of a
variable in a JSONPath state (`"x.$": "$name"`), which moto evaluates as JSONata too. Here both are evaluated in
Python:

- JSONata by jsonata2py (a port of jsonata-jvm-compiler: each expression translated to Python source once, compiled,
  then run; pure Python but for its `regex` wheel), chosen by measurement. bench/jsonata_conformance.py measures the
  candidates on PyPI side by side against JSONata 2.0.6, the version Step Functions implements (its test suite's 1,625
  cases; strict / counting any error where one is expected, which is all Step Functions sees since every error is
  States.QueryEvaluationError; µs an evaluation and a compile, the median over the cases all three pass): jsonata2py
  0.1.3 100 % / 100 %, 3.1 µs, 130 µs; jsonata-python 0.7.1 (the choice before it) 96.4 % / 99.4 %, 35 µs, 52 µs;
  jsonatapy 2.2.13 (a Rust extension, measured for reference) 99.4 % / 99.8 %, 1.1 µs, 2 µs. Each expression text is
  compiled once, and `$states` and the variables are bound as values: 4-8 µs a field reading a 1,000-item input,
  where moto wrote them into the expression's text as JSON and compiled that for every evaluation (105-125 ms).
- A JSONPath state's `$name.path` as AWS reads it: the variable, then the rest as a JSONPath on its value.

What AWS answers is kept (recorded by LocalStack's snapshot tests against AWS; the functions as the Step Functions
developer guide, "Transforming data with JSONata", documents them):
- an expression that returns nothing, or throws, fails the state with States.QueryEvaluationError, an EvaluationFailed
  event naming the field (`location`, e.g. `Output/result`), and the cause "The JSONata expression '<expr>'
  specified for the field '<location>' returned nothing (undefined)." or "... threw an error during evaluation.
  <code>: <message>";
- Step Functions' own functions: $partition, $range, $hash, $random (with an optional seed), $uuid, $parse; $eval is not
  there (AWS: use $parse), so calling it fails as a call of what is not a function does (T1006);
- a variable named as one of JSONata's functions (`$count`, `$type`) is that variable, as jsonata-js's bindings shadow
  its functions.
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

import jsonata2py
from jsonata2py.errors import ParseError, TranslatorError
from jsonata2py.optimizer.optimizer import optimize
from jsonata2py.parser.ast_nodes import AstNode, Block, VariableBinding, VariableRef
from jsonata2py.parser.parser import BUILTIN_NAMES, Parser
from jsonata2py.translator.translator import Translator
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


def _range(first: int, last: int, step: int) -> Any:
    """$range(start, end, step): start, start + step, ... up to end included (AWS: `$range(0, 10, 3)` is `[0,3,6,9]`).
    A JSONata sequence, as AWS answers it: a range of one number is that number (`$range(1, 9, 9)` is `1`)."""
    if step == 0:
        raise ValueError("$range takes a step other than 0")
    count = math.floor((last - first) / step) + 1
    if count < 1:
        return []  # a step away from the end: an empty array, as moto's own $range answered
    numbers = [_number(first + index * step) for index in range(count)]
    return numbers[0] if count == 1 else numbers


def _number(value: float) -> int | float:
    """A number as JSON writes it: a whole one as an int (`3`, not `3.0`)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _hash(value: str, algorithm: str) -> str:
    """$hash(value, algorithm): the hex digest of the UTF-8 string, by MD5, SHA-1, SHA-256, SHA-384 or SHA-512."""
    if not isinstance(value, str) or algorithm not in _HASHES:
        raise ValueError(f"$hash takes a string and one of {', '.join(_HASHES)}")
    return str(_HASHES[algorithm](value.encode()).hexdigest())


def _random(seed: Any = jsonata2py.MISSING) -> float:
    """$random([seed]): a number n with 0 <= n < 1; the same seed gives the same number (not AWS's number: its
    generator is not documented)."""
    if seed is jsonata2py.MISSING or seed is None:
        return random.random()
    if not isinstance(seed, (int, float, str)) or isinstance(seed, bool):
        raise ValueError("$random takes a number as its seed")
    return random.Random(seed).random()


def _parse(text: str) -> Any:
    """$parse(jsonString): the JSON value of a string (AWS's replacement for $eval)."""
    if not isinstance(text, str):
        raise ValueError("$parse takes a string")
    return json.loads(text, parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Bound to every compiled expression, as Step Functions provides them. $random is also JSONata's own, which jsonata2py
# calls directly, never through the bindings, so Step Functions' is bound under a name no expression can spell
# (`sfn:random`) and an expression that names `$random` binds it first (see `_Factory`).
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "partition": _partition,
    "range": _range,
    "hash": _hash,
    "sfn:random": _random,
    "uuid": lambda: str(uuid.uuid4()),
    "parse": _parse,
}


# --- evaluation -------------------------------------------------------------------------------------------------------
class _Undefined(Exception):
    """The expression returned nothing (JSONata's undefined), which JSON cannot hold."""


class _Unsupported(Exception):
    """The expression returned what is not JSON (a function)."""


class _Factory(jsonata2py.JsonataExpressionFactory):
    """jsonata2py's factory (thread-safe; it caches by the text it is given), for keys `<names>` NUL `<expression>`:
    the expression compiled inside a block that first binds each of the named JSONata functions `$name` to `$sfn:name`.
    jsonata2py resolves a JSONata function's name to its own function before any binding, where jsonata-js looks in
    the bindings first: a Step Functions variable named `count` is `$count` there, and `$random` is Step Functions'.
    `$sfn:eval` is never bound, so `$eval` is undefined and calling it fails (T1006)."""

    def translate(self, expression: str) -> str:
        names, text = expression.split("\0", 1)
        try:
            ast: AstNode = Parser.parse(text)
            if names:
                bound = [VariableBinding(name, VariableRef(f"sfn:{name}")) for name in names.split(",")]
                ast = Block([*bound, ast])
            return Translator.translate(optimize(ast), text)
        except (ParseError, TranslatorError) as error:  # as jsonata2py's own translate() reports them
            raise jsonata2py.JsonataCompilationError(error.error_code, str(error.message), error) from error
        except RecursionError as error:
            raise jsonata2py.JsonataCompilationError(
                None, "expression is too deeply nested to compile", error
            ) from error


_FACTORY = _Factory()
_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_ALWAYS_SHADOWED = frozenset({"random", "eval"})


@functools.lru_cache(maxsize=4096)
def _functions_named(text: str) -> frozenset[str]:
    """The JSONata functions an expression names as `$name` (a name inside a string literal counts too: harmless)."""
    return frozenset(_VARIABLE.findall(text)) & BUILTIN_NAMES


@functools.lru_cache(maxsize=4096)
def _compiled(text: str, shadowed: tuple[str, ...]) -> jsonata2py.CompiledExpression:
    """One compile per expression text and set of shadowed functions (a parse error is raised each time). A compiled
    expression is thread-safe: each evaluation keeps its bindings, scratch state and $now()/$millis() timestamp in its
    own context (a ContextVar). Step Functions' functions are bound to it once; each evaluation binds the values."""
    expression = _FACTORY.compile(f"{','.join(shadowed)}\0{text}")
    for name, function in _FUNCTIONS.items():
        expression.register_function(name, function)
    return expression


def _evaluate(text: str, env: Environment) -> Any:
    """The JSON value of `text` with the state's variables and `$states` bound. Raises what the expression throws,
    `_Undefined` or `_Unsupported`."""
    variables = moto_state.variables(env.variable_store)
    bindings = jsonata2py.JsonataBindings()
    for name, value in variables.items():
        bindings.bind_value(name, value)
    bindings.bind_value("states", env.states._states_data)  # moto's own `States` data, not copied: only read
    shadowed = _functions_named(text) & (_ALWAYS_SHADOWED | variables.keys())
    for name in shadowed & variables.keys():
        bindings.bind_value(f"sfn:{name}", variables[name])  # a variable named as a function is that variable
    result = _compiled(text, tuple(sorted(shadowed))).evaluate(None, bindings)
    if result is jsonata2py.MISSING:
        raise _Undefined
    return _json(result)


def _json(value: Any) -> Any:
    """A plain JSON value of a result: lists and dicts copied (a path's result is the bound input's own object)."""
    if isinstance(value, dict):
        return {key: _json(item) for key, item in value.items() if item is not jsonata2py.MISSING}
    if isinstance(value, list):
        return [_json(item) for item in value if item is not jsonata2py.MISSING]
    if isinstance(value, float) and not math.isfinite(value):
        raise jsonata2py.JsonataEvaluationError("D1001", f"Number out of range: {value}")
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise _Unsupported


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
        value = _evaluate(self.expression, env)
    except _Undefined:
        raise _fail(env, self.location, f"{expression} returned nothing (undefined).") from None
    except _Unsupported:
        raise _fail(env, self.location, f"{expression} returned an unsupported result type.") from None
    except Exception as thrown:  # noqa: BLE001 - whatever the expression throws is the state's QueryEvaluationError
        code = getattr(thrown, "error_code", None)
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
