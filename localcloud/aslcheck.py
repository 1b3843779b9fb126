"""Check Step Functions definition files (statemachines/*.asl.json) offline, before a deploy or a moto run.

Why: `sam validate` and cfn-lint only read template.yaml; a definition in a `DefinitionUri` file is opened by
neither, so a misspelt state type, a Next pointing nowhere or an integration moto cannot run shows up only
at deploy or execution time. After `${Placeholder}` DefinitionSubstitutions get plausible values, each file is
checked by (1) schema: the ASL JSON schema cfn-lint ships for rule E3601 (its non-standard `requiredXor`
is left to the graph check); (2) moto: moto's `AmazonStateLanguageParser`, i.e. what the local interpreter can
run; (3) graph: Next/Default/Choices/Catch targets and StartAt exist, every state is reachable, non-terminal
states have a Next; Parallel branches and Map processors are separate scopes.

Usage: python -m localcloud.aslcheck FILE...   (exit 0 when clean, else 1 and one `path: State: message` line each;
bad usage: one line on stderr, exit 2)
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped, unused-ignore]
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser, ASLParserException

from localcloud.account import ACCOUNT_ID
from localcloud.usage import Parser, prog, run

Problem = tuple[str, str]  # (state name, message)
TOP = "(top level)"
_PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")


def substitute(text: str) -> str:
    """Replace `${Name}` the way DefinitionSubstitutions would: an ARN for `...Arn`, the bare name otherwise."""

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        return f"arn:aws:lambda:us-east-1:{ACCOUNT_ID}:function:{name[:-3]}" if name.endswith("Arn") else name

    return _PLACEHOLDER.sub(value, text)


def _schema(definition: dict[str, Any]) -> dict[str, Any]:
    if definition.get("QueryLanguage") == "JSONata":  # cfn-lint swaps in its JSONata variant of the schema
        from cfnlint.rules.resources.stepfunctions.StateMachineDefinition import (  # type: ignore[import-untyped, unused-ignore]
            StateMachineDefinition,
        )

        schema = StateMachineDefinition()._convert_schema_to_jsonata()
        task = schema["definitions"]["task"]["properties"]
        for field in ("TimeoutSeconds", "HeartbeatSeconds"):  # a JSONata expression too, as AWS takes them
            task[field] = {"anyOf": [task[field], {"type": "string", "pattern": "^{%.*%}$"}]}
        text = json.dumps(schema)
    else:
        text = files("cfnlint.data.schemas.other.step_functions").joinpath("statemachine.json").read_text()
    # Parallel branches use `"$ref": "#/"`, which cfn-lint reads as the root; `referencing` wants "#".
    return dict(json.loads(re.sub(r'"\$ref":\s*"#/"', '"$ref": "#"', text)))


def check_schema(definition: dict[str, Any]) -> list[Problem]:
    problems = []
    for err in Draft202012Validator(_schema(definition)).iter_errors(definition):
        path = [str(p) for p in err.absolute_path]
        cut = max((i for i, p in enumerate(path[:-1]) if p == "States"), default=-2) + 2
        state = path[cut - 1] if cut > 0 else TOP
        field = "/".join(path[cut:])
        problems.append((state, f"schema: {field}: {err.message}" if field else f"schema: {err.message}"))
    return problems


def scopes(state: Any) -> list[dict[str, Any]]:
    """The nested state scopes of one state: Parallel branches, Map ItemProcessor/Iterator."""
    if not isinstance(state, dict):
        return []
    branches = state.get("Branches")
    candidates = [*(branches if isinstance(branches, list) else []), state.get("ItemProcessor"), state.get("Iterator")]
    return [s for s in candidates if isinstance(s, dict)]


def states_of(scope: dict[str, Any]) -> dict[str, Any]:
    """The states of one scope (a state machine, a Parallel branch, a Map's processor) by name."""
    return scope["States"] if isinstance(scope.get("States"), dict) else {}


def _moto_error(definition: dict[str, Any]) -> str | None:
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # ANTLR prints intrinsic-function errors to stderr
            AmazonStateLanguageParser.parse(json.dumps(definition))
    except ASLParserException as e:
        return "; ".join(re.sub(r"^line \d+:\d+, ", "", m) for m in e.errors)
    except Exception as e:  # noqa: BLE001 - the preprocessor raises ValueError, RecognitionException, ...
        message = f"{type(e).__name__}: {e}"
        return message if len(message) <= 300 else message[:297] + "..."
    return None


def _moto_states(scope: dict[str, Any], language: dict[str, Any]) -> list[Problem]:
    """Parse each state alone (innermost first) so a failure can be pinned on the state that causes it."""
    problems = []
    for name, state in states_of(scope).items():
        inner = [p for child in scopes(state) for p in _moto_states(child, language)]
        if inner:
            problems += inner
        elif (error := _moto_error({**language, "StartAt": name, "States": {name: state}})) is not None:
            problems.append((name, f"moto: {error}"))
    return problems


def check_moto(definition: dict[str, Any]) -> list[Problem]:
    error = _moto_error(definition)
    if error is None:
        return []
    language = {k: v for k, v in definition.items() if k == "QueryLanguage"}
    return _moto_states(definition, language) or [(TOP, f"moto: {error}")]


def _targets(state: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    yield "Next", state.get("Next")
    yield "Default", state.get("Default")
    for field in ("Choices", "Catch"):
        rules = state.get(field)
        for i, rule in enumerate(rules if isinstance(rules, list) else []):
            yield f"{field}[{i}].Next", rule.get("Next") if isinstance(rule, dict) else None


def check_graph(scope: dict[str, Any], owner: str = TOP) -> list[Problem]:
    problems: list[Problem] = []
    states, start = states_of(scope), scope.get("StartAt")
    edges: dict[str, list[str]] = {name: [] for name in states}
    dangling = False
    for name, state in states.items():
        state = state if isinstance(state, dict) else {}
        for field, target in _targets(state):
            if target in states:
                edges[name].append(target)
            elif target is not None:
                dangling = True
                problems.append((name, f"graph: {field} target {target!r} does not exist"))
        terminal = state.get("Type") in ("Succeed", "Fail", "Choice") or state.get("End") is True
        if not terminal and state.get("Next") is None:
            problems.append((name, "graph: has neither Next nor End: true"))
        for child in scopes(state):
            problems += check_graph(child, name)
    if start not in states:
        problems.append((owner, f"graph: StartAt {start!r} is not a state in this scope"))
    elif not dangling:  # a broken edge makes what follows it look unreachable too: report only the cause
        seen: set[str] = set()
        todo = [start]
        while todo:
            if (current := todo.pop()) not in seen:
                seen.add(current)
                todo += edges[current]
        problems += [(name, f"graph: unreachable from StartAt {start!r}") for name in states if name not in seen]
    return problems


def check_file(path: Path) -> list[str]:
    """All problems in one ASL file, as `path: State: message` lines."""
    try:
        definition = json.loads(substitute(path.read_text()))
    except (OSError, ValueError) as e:
        return [f"{path}: {TOP}: cannot read JSON: {e}"]
    if not isinstance(definition, dict):
        return [f"{path}: {TOP}: definition is not a JSON object"]
    problems = check_schema(definition) + check_moto(definition) + check_graph(definition)
    return [f"{path}: {state}: {message}" for state, message in problems]


def main(argv: list[str] | None = None) -> int:
    return run(_main, sys.argv[1:] if argv is None else argv, prog("localcloud.aslcheck"))


def _main(argv: list[str]) -> int:
    parser = Parser(prog=prog("localcloud.aslcheck"), description="Check ASL definition files.")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="ASL JSON definition file")
    lines = [line for path in parser.parse_args(argv).files for line in check_file(path)]
    for line in lines:
        print(line)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
