"""The offline cloud's front door, `python -m localcloud` (make local, make invoke) and the app's demo on it,
`python -m tools.demo` (make demo), as a new user meets them:
bad input is one line on stderr and a non-zero exit, never a traceback; `invoke --help` lists the functions; `invoke`
prints only the function's response on stdout, and runs on the offline cloud already running (a `make local`) when
there is one, saying which cloud it used."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from samtranslator.yaml_helper import yaml_parse

from localcloud.__main__ import PROG, main
from localcloud.cloud import LocalCloud
from tests.localcloud.conftest import FIXTURE_APP
from tools import demo

ROOT = Path(__file__).resolve().parents[2]
# The CLI in a process of its own, under the same guard as the tests: fake credentials, no AWS endpoint resolves.
GUARDED_CLI = (
    "import sys; from tests import aws_guard; aws_guard.install(); "
    "from localcloud.__main__ import main; sys.exit(main(sys.argv[1:]))"
)
# A hang guard only: every CLI run below ends on its own (the invocation's answer, or a deploy and its answer).
CLI_TIMEOUT_SECONDS = 300


def functions_of(template: Path) -> set[str]:
    resources = yaml_parse(template.read_text())["Resources"]
    return {
        name for name, r in resources.items() if r["Type"] in ("AWS::Serverless::Function", "AWS::Lambda::Function")
    }


def assert_one_line(stderr: str) -> str:
    """The whole of stderr is one line, and no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port nothing listens on while the test runs: bound here (so no one else takes it), never listening."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A port another process would hold: bound and listening while the test runs."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def run_cli(*args: str, aws_port: int, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m localcloud ARGS` in its own process, as `make invoke` runs it, with the fixture app's stack and a
    running cloud (or none) looked for on `aws_port`."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("LOCALCLOUD_")}
    environment.update(
        LOCALCLOUD_TEMPLATE=str(FIXTURE_APP),
        LOCALCLOUD_STACK_NAME="fixture",
        LOCALCLOUD_HOST="127.0.0.1",
        LOCALCLOUD_AWS_PORT=str(aws_port),
        PYTHONPATH=str(ROOT),
    )
    return subprocess.run(
        [sys.executable, "-c", GUARDED_CLI, *args],
        cwd=ROOT,
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        check=False,
    )


# --- help -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("template", [ROOT / "template.yaml", FIXTURE_APP], ids=["template.yaml", "fixture"])
def test_invoke_help_lists_the_templates_functions(template: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # When a user asks `invoke` for help
    with pytest.raises(SystemExit) as exited:
        main(["invoke", "--help", "-t", str(template)])

    # Then it lists every function of the template by the logical ID invoke takes
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    listed = shown.partition("functions of")[2]
    assert functions_of(template) <= set(listed.split())
    assert functions_of(template), "the template declares functions"


def test_invoke_help_shows_the_sample_events_of_a_function(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["invoke", "--help", "-t", str(ROOT / "template.yaml")])
    line = next(line for line in capsys.readouterr().out.splitlines() if "RegisterTokenFunction" in line)
    assert "events/register_token." in line


def test_top_level_help_says_where_the_functions_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "invoke --help` lists the functions" in capsys.readouterr().out


# --- bad input: one line, non-zero ------------------------------------------------------------------------------------
def test_a_misspelled_function_is_one_line_naming_the_close_one(capsys: pytest.CaptureFixture[str]) -> None:
    # When a user misspells the function (no cloud is deployed for it)
    code = main(["invoke", "EchoFuncton", "-t", str(FIXTURE_APP), "--fresh"])

    # Then one line says so and names the function meant, and how to list them all
    assert code != 0
    line = assert_one_line(capsys.readouterr().err)
    assert "EchoFuncton" in line
    assert "did you mean EchoFunction?" in line
    assert "invoke --help" in line


def test_an_unknown_function_is_one_line_saying_how_to_list_them(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["invoke", "Zzzz", "-t", str(FIXTURE_APP), "--fresh"])
    assert code != 0
    line = assert_one_line(capsys.readouterr().err)
    assert "Zzzz" in line
    assert "did you mean" not in line
    assert "invoke --help` lists its" in line


def test_a_missing_event_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.json"
    code = main(["invoke", "EchoFunction", "-e", str(missing), "-t", str(FIXTURE_APP), "--fresh"])
    assert code != 0
    line = assert_one_line(capsys.readouterr().err)
    assert str(missing) in line
    assert "No such file" in line


def test_an_event_that_is_not_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    event = tmp_path / "event.json"
    event.write_text("{not json")
    code = main(["invoke", "EchoFunction", "-e", str(event), "-t", str(FIXTURE_APP), "--fresh"])
    assert code != 0
    assert "is not JSON" in assert_one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv",
    [
        ["invoke"],  # no function
        ["invoke", "EchoFunction", "-e"],  # -e without its file
        ["serve", "--speedup", "fast"],
        ["launch"],  # no such command
    ],
    ids=["no-function", "event-flag-without-file", "bad-speedup", "unknown-command"],
)
def test_a_usage_error_is_one_line_not_argparses_block(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)
    assert code != 0
    assert "--help" in assert_one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("command", "argv"),
    [(main, ["serve"]), (demo.main, []), (main, ["invoke", "EchoFunction", "--fresh"])],
    ids=["serve", "demo", "invoke"],
)
def test_a_missing_template_is_one_line(
    command: Callable[[list[str]], int], argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "template.yaml"
    code = command([*argv, "-t", str(missing)])
    assert code != 0
    line = assert_one_line(capsys.readouterr().err)
    assert str(missing) in line
    # and it names the command that was run, to run it again with another template
    assert line.startswith(f"{demo.PROG}: " if command is demo.main else f"{PROG}")


def test_serve_on_a_port_in_use_is_one_line(
    listening_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given another process (a `make local` already running) holds the AWS endpoint's port
    monkeypatch.setenv("LOCALCLOUD_AWS_PORT", str(listening_port))
    monkeypatch.setenv("LOCALCLOUD_HTTP_PORT", "0")

    # When a second one starts, it says which port and which setting picks another, before starting anything
    code = main(["serve", "-t", str(FIXTURE_APP)])
    assert code != 0
    line = assert_one_line(capsys.readouterr().err)
    assert str(listening_port) in line
    assert "LOCALCLOUD_AWS_PORT" in line


def test_a_setting_that_is_not_a_number_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOCALCLOUD_SPEEDUP", "fast")
    code = main(["serve", "-t", str(FIXTURE_APP)])
    assert code != 0
    assert "LOCALCLOUD_SPEEDUP" in assert_one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("command", "argv", "setting"),
    [
        (main, ["serve", "--speedup", "0"], None),
        (main, ["serve", "--speedup", "-1"], None),
        (main, ["serve"], "0"),
        (demo.main, ["--speedup", "0"], None),
    ],
    ids=["zero", "negative", "LOCALCLOUD_SPEEDUP=0", "demo"],
)
def test_a_speedup_that_is_not_positive_is_a_usage_error(
    command: Callable[[list[str]], int],
    argv: list[str],
    setting: str | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if setting is not None:
        monkeypatch.setenv("LOCALCLOUD_SPEEDUP", setting)
    code = command([*argv, "-t", str(FIXTURE_APP)])
    assert code == 2
    assert "speedup must be positive" in assert_one_line(capsys.readouterr().err)


def test_a_seed_that_names_no_function_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["serve", "--seed", "tools.demo.no_such_seed", "-t", str(FIXTURE_APP)])
    assert code == 2
    assert "--seed tools.demo.no_such_seed" in assert_one_line(capsys.readouterr().err)


def test_an_endpoint_with_no_cloud_is_one_line(closed_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    # When the user names a running cloud's endpoint where none runs, invoke does not quietly deploy another
    endpoint = f"http://127.0.0.1:{closed_port}"
    code = main(["invoke", "EchoFunction", "-t", str(FIXTURE_APP), "--endpoint", endpoint])
    assert code != 0
    assert f"no offline cloud at {endpoint}" in assert_one_line(capsys.readouterr().err)


# --- invoke on the running cloud --------------------------------------------------------------------------------------
def test_invoke_runs_on_the_running_cloud_and_says_so(cloud: LocalCloud, tmp_path: Path) -> None:
    # Given an offline cloud running the fixture app (as `make local` runs template.yaml), and an event file
    assert cloud.server is not None
    event = {"hello": "world", "marker": str(uuid.uuid4())}
    (tmp_path / "event.json").write_text(json.dumps(event))

    # When the user invokes a function with the CLI pointed at that cloud's endpoint (LOCALCLOUD_AWS_PORT)
    done = run_cli("invoke", "EchoFunction", "-e", str(tmp_path / "event.json"), aws_port=cloud.server.port)

    # Then that cloud's function answered: its deployed name, the event as sent
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)  # stdout is the response and nothing else
    echo = next(r for r in cloud.stack.of_type("AWS::Lambda::Function") if r.logical_id == "EchoFunction")
    assert response["function"] == echo.physical_id
    assert response["event"] == event
    # and stderr says which cloud it used, in one line (the function's log lines print where that cloud runs)
    line = assert_one_line(done.stderr)
    assert f"running offline cloud at {cloud.aws_endpoint}" in line


def test_invoke_on_the_running_cloud_uses_its_tables(cloud: LocalCloud) -> None:
    # Given the running cloud's RecordTable, and an event no one sent before
    marker = str(uuid.uuid4())

    # When the user invokes the recorder through the CLI, the event on stdin
    done = run_cli("invoke", "RecorderFunction", "-e", "-", aws_port=cloud.server.port, stdin=json.dumps({"m": marker}))

    # Then the record is in that cloud's table (the invocation answered after writing it)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}
    items = cloud.client("dynamodb").scan(TableName=cloud.stack.outputs["RecordTableName"])["Items"]
    assert any(marker in item["body"]["S"] for item in items if "body" in item)


def test_a_misspelled_function_on_the_running_cloud_is_one_line(cloud: LocalCloud) -> None:
    done = run_cli("invoke", "echofunction", aws_port=cloud.server.port)
    assert done.returncode != 0
    assert done.stdout == ""
    line = assert_one_line(done.stderr)
    assert "running offline cloud's stack fixture" in line
    assert "did you mean EchoFunction?" in line


def test_a_function_error_on_the_running_cloud_is_lambdas_payload_and_exit_1(cloud: LocalCloud) -> None:
    done = run_cli("invoke", "EchoFunction", "-e", "-", aws_port=cloud.server.port, stdin='{"fail": "on purpose"}')
    assert done.returncode == 1
    payload = json.loads(done.stdout)
    assert payload["errorType"] == "EchoFailed"
    assert payload["errorMessage"] == "on purpose"


# --- invoke without a running cloud -----------------------------------------------------------------------------------
def test_invoke_without_a_running_cloud_deploys_a_fresh_one_and_prints_only_json(
    cloud: LocalCloud, closed_port: int
) -> None:
    # Given no cloud on the port the CLI looks at (the module's cloud only makes sure the fixture app is built)
    # When the user invokes a function
    done = run_cli("invoke", "EchoFunction", "-e", "-", aws_port=closed_port, stdin='{"fresh": true}')

    # Then stdout is the response alone, as JSON
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)
    assert response["event"] == {"fresh": True}
    assert response["function"].startswith("fixture-EchoFunction")
    # and a fresh cloud served it, not the running one, as stderr's first line says
    echo = next(r for r in cloud.stack.of_type("AWS::Lambda::Function") if r.logical_id == "EchoFunction")
    assert response["function"] != echo.physical_id
    assert "Traceback" not in done.stderr
    said = done.stderr.splitlines()[0]
    assert f"no offline cloud at http://127.0.0.1:{closed_port}" in said
    assert "fresh offline cloud" in said
