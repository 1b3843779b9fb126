"""The JSONata implementations on PyPI against JSONata's own test suite: how much of it each passes, and how fast.

    python -m venv /tmp/jsonata-venv
    /tmp/jsonata-venv/bin/pip install jsonata-python==0.7.1 jsonata2py==0.1.3 jsonatapy==2.2.13
    git -C <a clone of jsonata-js/jsonata> archive v2.0.6 test/test-suite | tar -x -C /tmp/jsonata-2.0.6
    python -m bench.jsonata_conformance /tmp/jsonata-2.0.6/test/test-suite --python /tmp/jsonata-venv/bin/python

Why: the offline cloud evaluates Step Functions' JSONata in Python (localcloud/fixes/jsonata.py; docs/offline-cloud.md,
gap 36), and Step Functions implements JSONata 2.0.6, so the choice is measured on jsonata-js 2.0.6's suite
(`groups/<group>/*.json`, inputs in `datasets/`; the suite's TESTSUITE.md says what a case holds). The suite is given
as a directory: nothing is downloaded here. The candidates are installed in a venv of their own (never the project's
.venv) and each runs in a process of that venv's interpreter (this file run as a script, stdlib only), one case after
another; a case that crashes the process is counted failed and the next case goes on in a new process.

Per case, as jsonata-js's own runner (test/run-test-suite.js) judges it: the expression compiled once, evaluated with
the case's input and bindings (its `timelimit` and `depth` given to the library's own runtime bounds where it has
them; every case is also cut off after GUARD_S seconds), then
- strict: the result deep-equals the expected one (numbers by value, a boolean never a number, `undefinedResult` the
  library's undefined), or the error has the expected code;
- lenient: as strict, but any error passes where one is expected. That is all Step Functions shows of an error: every
  throw is States.QueryEvaluationError.
Speed: in a second pass, each case that passed is evaluated REPEAT more times on its compiled expression (the verdicts
are the first pass's, where every case is evaluated once), its µs per evaluation the median of those; its compile time
is its first compile's (a library's cache of what it compiled counts only where two cases share an expression's
text). Both are summarised (median) over the cases every candidate passes, the same work for each. Reported: per
candidate, its version, the pass rates and the times; the groups where the chosen one (`--chosen`, jsonata2py by
default: what localcloud uses) fails, strict (every candidate's failing cases are in the results). Results:
.aws-sam/bench/jsonata.json, and the table printed (docs/offline-cloud.md, gap 36, quotes it).
Run it on an idle machine: a case with a `timelimit` fails when the machine is too busy to finish it in time.

jsonatapy is a Rust extension, not pure Python: measured for reference. It answers None for undefined and for null
alike, so a top-level None passes for either.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".aws-sam" / "bench" / "jsonata.json"
CANDIDATES = ("jsonata-python", "jsonata2py", "jsonatapy")
PURE_PYTHON = {"jsonata-python": True, "jsonata2py": True, "jsonatapy": False}
REPEAT = 20
GUARD_S = 10.0
UNDEFINED = {"<undefined>": True}  # a result JSON cannot hold, compared by identity
FUNCTION = "<function>"
CODE = re.compile(r"\b([A-Z]\d{4})\b")
MARK = "@case"  # a worker's answer line


# ----------------------------------------------------------------------------------------------------------------
# The suite
# ----------------------------------------------------------------------------------------------------------------
def cases(suite: Path) -> list[dict[str, Any]]:
    """Every case of the suite in a fixed order, each with its `id` (`group/file` or `group/file#n`) and `group`."""
    found = []
    for group in sorted(p for p in (suite / "groups").iterdir() if p.is_dir()):
        for file in sorted(group.glob("*.json")):
            spec = json.loads(file.read_text(encoding="utf-8"))
            for n, case in enumerate(spec if isinstance(spec, list) else [spec]):
                name = f"{group.name}/{file.stem}" + (f"#{n}" if isinstance(spec, list) else "")
                if "expr-file" in case:
                    case["expr"] = (group / case["expr-file"]).read_text(encoding="utf-8")
                found.append({**case, "id": name, "group": group.name})
    return found


def dataset(suite: Path, case: dict[str, Any]) -> Any:
    """The case's input: `data` (a JSON null is None), else the named dataset, else UNDEFINED."""
    if "data" in case:
        return case["data"]
    if case.get("dataset") is not None:
        return json.loads((suite / "datasets" / f"{case['dataset']}.json").read_text(encoding="utf-8"))
    return UNDEFINED


def expected_code(case: dict[str, Any]) -> str | None:
    error = case.get("error")
    return str(case["code"]) if "code" in case else str(error["code"]) if isinstance(error, dict) else None


def same(got: Any, want: Any, unordered: bool = False) -> bool:
    """Deep equality as chai's deep.equal sees JSON: numbers by value, booleans apart from numbers."""
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return got == want or (math.isnan(got) and math.isnan(want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return False
        if unordered:
            left = list(got)
            for item in want:
                match = next((i for i, g in enumerate(left) if same(g, item)), None)
                if match is None:
                    return False
                left.pop(match)
            return True
        return all(same(g, w) for g, w in zip(got, want, strict=True))
    return bool(got is want or (type(got) is type(want) and got == want))


# ----------------------------------------------------------------------------------------------------------------
# The candidates: compile, evaluate (a plain JSON value, UNDEFINED, or FUNCTION), the code of an error
# ----------------------------------------------------------------------------------------------------------------
class Candidate:
    """A library's way to compile and evaluate (an input of UNDEFINED is JSONata's undefined, None its null)."""

    def compile(self, text: str) -> Any:
        raise NotImplementedError

    def evaluate(self, compiled: Any, data: Any, bindings: dict[str, Any], bounds: tuple[int, int] | None) -> Any:
        raise NotImplementedError

    def code(self, error: BaseException) -> str | None:
        found = CODE.search(str(error))
        return found.group(1) if found else None


class JsonataPython(Candidate):
    """jsonata-python (Jsonata(text); JSON null is Utils.NULL_VALUE, undefined None; bounds on a Frame)."""

    def __init__(self) -> None:
        import jsonata

        self.jsonata = jsonata
        self.null = jsonata.Utils.NULL_VALUE

    def compile(self, text: str) -> Any:
        expression = self.jsonata.Jsonata(text)
        expression.set_output_convert_nulls(False)  # null and undefined kept apart, as localcloud keeps them
        return expression

    def evaluate(self, compiled: Any, data: Any, bindings: dict[str, Any], bounds: tuple[int, int] | None) -> Any:
        frame = self.jsonata.Jsonata.Frame(None)
        for name, value in bindings.items():
            frame.bind(name, value)
        if bounds:
            frame.set_runtime_bounds(*bounds)
        self.jsonata.Jsonata.CURRENT.jsonata = compiled  # its per-evaluation state (localcloud does the same)
        given = None if data is UNDEFINED else self.null if data is None else data
        result = compiled.evaluate(given, frame if bindings or bounds else None)
        return UNDEFINED if result is None else self._plain(result)

    def _plain(self, value: Any) -> Any:
        if value is self.null or value is None:
            return None
        if isinstance(value, dict):
            return {key: self._plain(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._plain(item) for item in value]
        return value if isinstance(value, (str, int, float, bool)) else FUNCTION

    def code(self, error: BaseException) -> str | None:
        return getattr(error, "error", None) or super().code(error)


class Jsonata2Py(Candidate):
    """jsonata2py (compile to Python source; undefined is MISSING, null None; a timeout, no depth bound)."""

    def __init__(self) -> None:
        import jsonata2py

        self.jsonata2py = jsonata2py
        self.factory = jsonata2py.JsonataExpressionFactory()  # one, as the library advises: it keeps what it compiled

    def compile(self, text: str) -> Any:
        return self.factory.compile(text)

    def evaluate(self, compiled: Any, data: Any, bindings: dict[str, Any], bounds: tuple[int, int] | None) -> Any:
        given = self.jsonata2py.JsonataBindings()
        for name, value in bindings.items():
            given.bind_value(name, value)
        compiled.set_timeout(bounds[0] if bounds else 0)
        result = compiled.evaluate(self.jsonata2py.MISSING if data is UNDEFINED else data, given)
        return UNDEFINED if result is self.jsonata2py.MISSING else self._plain(result)

    def _plain(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: self._plain(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._plain(item) for item in value]
        return value if value is None or isinstance(value, (str, int, float, bool)) else FUNCTION

    def code(self, error: BaseException) -> str | None:
        return getattr(error, "error_code", None) or super().code(error)


class JsonataPy(Candidate):
    """jsonatapy (Rust; None for undefined and null alike; timeout and max_stack_depth)."""

    def __init__(self) -> None:
        import jsonatapy

        self.jsonatapy = jsonatapy

    def compile(self, text: str) -> Any:
        return self.jsonatapy.compile(text)

    def evaluate(self, compiled: Any, data: Any, bindings: dict[str, Any], bounds: tuple[int, int] | None) -> Any:
        limits = {"timeout": bounds[0], "max_stack_depth": bounds[1]} if bounds else {}
        return compiled.evaluate(None if data is UNDEFINED else data, bindings or None, **limits)


ADAPTERS: dict[str, Callable[[], Candidate]] = {
    "jsonata-python": JsonataPython,
    "jsonata2py": Jsonata2Py,
    "jsonatapy": JsonataPy,
}


# ----------------------------------------------------------------------------------------------------------------
# The worker: this file run by the candidates' interpreter, one JSON line per case on stdout
# ----------------------------------------------------------------------------------------------------------------
class Runaway(Exception):
    """The case ran past GUARD_S."""


def _guard(signum: int, frame: Any) -> None:
    raise Runaway(f"still running after {GUARD_S} s")


def judge(candidate: Candidate, case: dict[str, Any], got: Any, error: BaseException | None) -> dict[str, Any]:
    want_code = expected_code(case)
    if error is not None:
        code = candidate.code(error)
        detail = f"{type(error).__name__}: {error}"[:200]
        return {"strict": want_code is not None and code == want_code, "lenient": want_code is not None} | {
            "error": code or type(error).__name__,
            "detail": detail,
        }
    if "undefinedResult" in case:
        ok = got is UNDEFINED or (isinstance(candidate, JsonataPy) and got is None)
    elif "result" in case:
        want = case["result"]
        ok = same(got, want, bool(case.get("unordered"))) or (
            isinstance(candidate, JsonataPy) and got is None and want is None
        )
    else:
        ok = False
    shown = "undefined" if got is UNDEFINED else json.dumps(got, default=str)[:200]
    return {"strict": ok, "lenient": ok, "error": None, "detail": shown}


def timed(action: Callable[[], Any], repeat: int) -> float:
    """The median of `repeat` runs of `action`, in µs."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        action()
        runs.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(runs)


def speed(
    candidate: Candidate,
    compiled: Any,
    data: Any,
    bindings: dict[str, Any],
    bounds: tuple[int, int] | None,
    repeat: int,
) -> float | None:
    """µs per evaluation of a case that passed (the median of `repeat`); None for one that cannot be timed within
    GUARD_S."""
    signal.setitimer(signal.ITIMER_REAL, GUARD_S)
    try:
        return timed(lambda: candidate.evaluate(compiled, data, bindings, bounds), repeat)
    except (Exception, RecursionError):  # noqa: BLE001 - a case too slow to time is left untimed
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def work(name: str, suite: Path, start: int, repeat: int) -> None:
    from importlib.metadata import version

    answers, sys.stdout = sys.stdout, sys.stderr  # stdout is this protocol's alone, whatever a library prints
    candidate = ADAPTERS[name]()
    print(MARK, json.dumps({"version": version(name)}), file=answers, flush=True)
    signal.signal(signal.SIGALRM, _guard)
    for index, case in enumerate(cases(suite)[start:], start):
        bounds = (int(case["timelimit"]), int(case["depth"])) if "timelimit" in case and "depth" in case else None
        data, bindings = dataset(suite, case), case.get("bindings") or {}
        got, error, compiled, compile_us, eval_us = None, None, None, None, None
        signal.setitimer(signal.ITIMER_REAL, GUARD_S)
        try:
            started = time.perf_counter_ns()
            compiled = candidate.compile(case["expr"])
            compile_us = (time.perf_counter_ns() - started) / 1000
            got = candidate.evaluate(compiled, data, bindings, bounds)
        except (Exception, RecursionError) as exc:  # noqa: BLE001 - every error is an outcome the case judges
            error = exc
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        verdict = judge(candidate, case, got, error)
        if error is None and verdict["strict"] and repeat:
            eval_us = speed(candidate, compiled, data, bindings, bounds, repeat)
        answer = {"i": index, **verdict, "eval_us": eval_us, "compile_us": compile_us}
        print(MARK, json.dumps(answer), file=answers, flush=True)


# ----------------------------------------------------------------------------------------------------------------
# The parent: a worker per candidate (restarted past a case that crashed it), then the summary
# ----------------------------------------------------------------------------------------------------------------
def run(python: str, name: str, suite: Path, total: int, repeat: int) -> tuple[str | None, list[dict[str, Any]]]:
    """A candidate's outcome per case: the verdicts of a pass that evaluates each case once, the times of a second
    pass that evaluates it `repeat` times more (a library that keeps state across evaluations cannot have its
    verdicts changed by the timing: a case passed only in the second pass is left untimed)."""
    version, verdicts = one_pass(python, name, suite, total, 0)
    if not verdicts:
        return version, []
    _, timings = one_pass(python, name, suite, total, repeat)
    return version, [
        verdict | {"eval_us": timing["eval_us"] if timing["strict"] else None}
        for verdict, timing in zip(verdicts, timings, strict=True)
    ]


def one_pass(python: str, name: str, suite: Path, total: int, repeat: int) -> tuple[str | None, list[dict[str, Any]]]:
    """Every case through a worker, restarted past a case that crashed it."""
    results: dict[int, dict[str, Any]] = {}
    version, start = None, 0
    while start < total:
        command = [python, str(Path(__file__).resolve()), "--worker", name, "--repeat", str(repeat), str(suite)]
        process = subprocess.run([*command, "--start", str(start)], capture_output=True, text=True, check=False)
        for line in process.stdout.splitlines():
            if not line.startswith(MARK):
                continue
            answer = json.loads(line.removeprefix(MARK))
            if "version" in answer:
                version = answer["version"]
            else:
                results[answer.pop("i")] = answer
        if process.returncode == 0 and not results and start == 0:
            break
        done = max(results, default=start - 1)
        if process.returncode != 0:
            if version is None:  # not installed, or broken before its first case
                return None, []
            crashed = done + 1
            detail = f"the process ended ({process.returncode}): {process.stderr.strip()[-200:]}"
            results[crashed] = {"strict": False, "lenient": False, "error": "crash", "detail": detail}
            results[crashed] |= {"eval_us": None, "compile_us": None}
            done = crashed
        start = done + 1
    return version, [results[i] for i in range(total)]


Found = dict[str, tuple[str | None, list[dict[str, Any]]]]  # per candidate: its version and its outcomes per case


def summary(all_cases: list[dict[str, Any]], found: Found) -> dict[str, Any]:
    ran = {name: outcomes for name, (version, outcomes) in found.items() if outcomes}
    common = [i for i in range(len(all_cases)) if all(o[i]["eval_us"] is not None for o in ran.values())]
    report: dict[str, Any] = {"cases": len(all_cases), "timed_in_common": len(common), "candidates": {}}
    for name, (version, outcomes) in found.items():
        if not outcomes:
            report["candidates"][name] = {"installed": False}
            continue
        report["candidates"][name] = {
            "installed": True,
            "version": version,
            "pure_python": PURE_PYTHON[name],
            "strict_pct": round(100 * sum(o["strict"] for o in outcomes) / len(outcomes), 1),
            "lenient_pct": round(100 * sum(o["lenient"] for o in outcomes) / len(outcomes), 1),
            "eval_us_median": round(statistics.median(outcomes[i]["eval_us"] for i in common), 1) if common else None,
            "eval_us_mean": round(statistics.fmean(outcomes[i]["eval_us"] for i in common), 1) if common else None,
            "compile_us_median": round(statistics.median(outcomes[i]["compile_us"] for i in common), 1)
            if common
            else None,
        }
    return report


def failing_groups(all_cases: list[dict[str, Any]], outcomes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per group the chosen candidate fails (strict): failed / total, and the failing cases with what it gave."""
    groups: dict[str, dict[str, Any]] = {}
    for case, outcome in zip(all_cases, outcomes, strict=True):
        group = groups.setdefault(case["group"], {"failed": 0, "total": 0, "cases": []})
        group["total"] += 1
        if not outcome["strict"]:
            group["failed"] += 1
            want = expected_code(case) or ("undefined" if "undefinedResult" in case else case.get("result"))
            group["cases"].append({"id": case["id"], "expected": want, "got": outcome["error"] or outcome["detail"]})
    return {name: group for name, group in sorted(groups.items()) if group["failed"]}


def table(report: dict[str, Any]) -> Iterator[str]:
    yield f"{report['cases']} cases; times over the {report['timed_in_common']} every candidate passes"
    columns = ("strict %", 8), ("lenient %", 9), ("µs/eval", 9), ("µs/compile", 10)
    yield f"{'candidate':16} {'version':9} {'pure':5} " + " ".join(f"{name:>{width}}" for name, width in columns)
    for name, row in report["candidates"].items():
        if not row["installed"]:
            yield f"{name:16} not installed"
            continue
        yield (
            f"{name:16} {row['version']:9} {'yes' if row['pure_python'] else 'no':5} {row['strict_pct']:8.1f} "
            f"{row['lenient_pct']:9.1f} {row['eval_us_median'] or 0:9.1f} {row['compile_us_median'] or 0:10.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.jsonata_conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("suite", type=Path, help="jsonata-js's test/test-suite directory (groups/, datasets/)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter the candidates are installed for")
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--chosen", default="jsonata2py", help="whose failing groups to list")
    parser.add_argument("--repeat", type=int, default=REPEAT)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not (args.suite / "groups").is_dir() or not (args.suite / "datasets").is_dir():
        parser.error(f"{args.suite} has no groups/ and datasets/: give jsonata-js's test/test-suite directory")
    if args.worker:
        work(args.worker, args.suite, args.start, args.repeat)
        return 0
    all_cases = cases(args.suite)
    found = {}
    for name in args.candidates.split(","):
        found[name] = run(args.python, name, args.suite, len(all_cases), args.repeat)
        print(f"{name}: {'measured' if found[name][1] else 'not installed'}", file=sys.stderr, flush=True)
    report = summary(all_cases, found)
    report["failing_groups"] = {
        name: failing_groups(all_cases, outcomes) for name, (_, outcomes) in found.items() if outcomes
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    print("\n".join(table(report)))
    for group, failed in report.get("failing_groups", {}).get(args.chosen, {}).items():
        print(f"  {args.chosen} fails {failed['failed']}/{failed['total']} of {group}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
