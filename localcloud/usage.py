"""Bad input on a command line of the offline cloud (`python -m localcloud`, `python -m localcloud.aslcheck`) and of
the app's tools built on it: one line on stderr and a non-zero exit, never a traceback (`--verbose` shows it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


class UsageError(Exception):
    """Bad input: its message is the one line the command prints on stderr (exit 2)."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (UsageError) instead of its usage block and message."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (`{self.prog} --help` for usage)")


def prog(module: str) -> str:
    """How to run `python -m module` again from here: `.venv/bin/python -m module` in the project."""
    try:
        return f"{Path(sys.executable).relative_to(Path.cwd())} -m {module}"
    except ValueError:
        return f"python -m {module}"


def one_line(exc: BaseException) -> str:
    """An exception as one line: its first line of text, with its class name where the text alone says little."""
    text = str(exc).strip()
    if isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0])
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, OSError) and exc.strerror:
        first = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    more = " (--verbose for the rest)" if len(text.splitlines()) > 1 else ""
    return f"{type(exc).__name__}: {first}{more}" if first else type(exc).__name__


def run(main: Callable[[list[str]], int], argv: list[str], prog: str) -> int:
    """`main(argv)`'s exit code, its failures as one line on stderr: a UsageError's message (exit 2), any other
    exception as `prog: Type: message` (exit 1; with --verbose in `argv`, its traceback), Ctrl-C as exit 130."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        return 130
    except UsageError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 2
    except Exception as exc:
        if "--verbose" in argv:
            raise
        print(f"{prog}: {one_line(exc)}", file=sys.stderr, flush=True)
        return 1
