"""`python -m localcloud serve` (make local) and `invoke` (make invoke: `sam local invoke` without Docker, against
the running `make local` when there is one). `make demo` is the app's own (tools/demo.py), on the helpers here.

Bad input (an unknown function, a missing file, a port in use, a template that does not deploy) is one line on stderr
and a non-zero exit, never a traceback (`--verbose` shows it). `invoke` prints only the function's response on stdout.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import json
import logging
import os
import re
import signal
import socket
import sys
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from samtranslator.yaml_helper import yaml_parse

from localcloud import account
from localcloud.clock import Clock
from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.simulators import Simulator
from localcloud.simulators.bda import BdaSimulator
from localcloud.simulators.healthlake import HealthLakeSimulator
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator
from localcloud.usage import Parser, UsageError, one_line, prog, run

# An app's sample data, put into the stack once it is up (`serve --seed`); the line it returns goes under the banner.
Seed = Callable[[LocalCloud], str]


def banner(cloud: LocalCloud) -> str:
    cfg = cloud.config
    credential = cfg.credentials[0]
    lines = [
        f"offline cloud up: stack {cloud.stack.name} from {cfg.template}",
        f"  AWS endpoint   {cloud.aws_endpoint}   (aws --endpoint-url {cloud.aws_endpoint} stepfunctions "
        "list-state-machines)",
    ]
    if cloud.http:
        lines.append(
            f"  HTTP API       {cloud.http.url}   (SigV4: access key {credential.access_key_id}, "
            f"secret {credential.secret_access_key}, service execute-api, region {cfg.region})"
        )
    lines.append(f"  clock speed-up {cfg.speedup:g}x")
    lines.append(f"  logs           {cloud.function_log}   (function logs, and the offline cloud's own diagnostics)")
    lines.append("  stack outputs:")
    lines += [f"    {key} = {value}" for key, value in sorted(cloud.stack.outputs.items())]
    return "\n".join(lines)


def simulated_services(config: CloudConfig, clock: Clock) -> tuple[CloudConfig, list[Simulator]]:
    """Simulated Translate, Macie, Bedrock Data Automation and HealthLake (with one data store, which the stack's
    export workflow uses), on the clock the cloud will run on."""
    region = config.region
    healthlake = HealthLakeSimulator(region, delay_seconds=120, clock=clock, file_count=3, records_per_file=20)
    parameters = {
        "HealthLakeDatastoreId": healthlake.create_datastore("callback-kit"),
        **_fitting(account.profile(config.account)),
        **config.parameters,
    }
    simulated = [
        TranslateSimulator(region, delay_seconds=120, clock=clock),
        MacieSimulator(region, delay_seconds=180, clock=clock),
        BdaSimulator(region, delay_seconds=60, clock=clock),
        healthlake,
    ]
    return replace(config, parameters=parameters), simulated


def _fitting(profile: account.AccountProfile) -> dict[str, str]:
    """The parameters `make preflight` would advise for an account of this profile (docs/deploy.md): turn Macie on
    where it is off."""
    return {"EnableMacie": "false" if profile.macie_enabled else "true"}


def serve(config: CloudConfig, clock: Clock, seed: Seed | None = None) -> int:
    """The offline cloud until Ctrl-C: function logs on stderr (prefixed with the function's name) and in the log
    file, moto's and werkzeug's only in the file; the app's sample data put in by `seed`."""
    from localcloud.client import route_logs

    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    config, simulated = simulated_services(replace(config, echo_function_logs=True), clock)
    cloud = LocalCloud(config, clock)
    route_logs(cloud.function_log)
    with cloud:
        for simulator in simulated:
            cloud.add_simulator(simulator)
        seeded = seed(cloud) if seed else None
        print(banner(cloud), flush=True)
        if seeded:
            print(f"  {seeded}", flush=True)
        print("Ctrl-C to stop.", flush=True)
        stop.wait()
    return 0


PROG = prog("localcloud")
FUNCTION_TYPES = ("AWS::Serverless::Function", "AWS::Lambda::Function")
# Lambda's longest Timeout, and a margin: how long `invoke` waits for a running cloud's answer.
INVOKE_READ_TIMEOUT_SECONDS = 15 * 60 + 30


@dataclass(frozen=True)
class RunningCloud:
    """An offline cloud serving the stack at `endpoint` (a `make local`): its functions by logical ID."""

    endpoint: str
    stack_name: str
    functions: dict[str, str]  # logical ID -> function name


def template_functions(template: Path, command: str = PROG) -> list[str]:
    """The logical IDs of the template's functions (what `invoke` takes), sorted; no template is `command`'s
    UsageError."""
    if not template.is_file():
        raise UsageError(f"{command}: no template {template} (-t or LOCALCLOUD_TEMPLATE names another)")
    resources = yaml_parse(template.read_text()).get("Resources", {})
    return sorted(name for name, resource in resources.items() if resource.get("Type") in FUNCTION_TYPES)


def _sample_events(template: Path, logical_id: str) -> list[str]:
    """The template's sample events of a function, by this project's naming: RegisterTokenFunction ->
    events/register_token.*.json."""
    stem = re.sub(r"(?<!^)(?=[A-Z])", "_", logical_id.removesuffix("Function")).lower()
    folder = template.parent / "events"
    return sorted(path.name for path in folder.glob(f"{stem}.*.json")) if folder.is_dir() else []


def _functions_epilog(template: Path) -> str:
    if not template.is_file():
        return f"(no template {template}: no functions to list; -t or LOCALCLOUD_TEMPLATE names another)"
    try:
        functions = template_functions(template)
    except Exception as exc:  # noqa: BLE001 - help still prints, saying why it lists no function
        return f"(no functions listed: {template}: {one_line(exc)})"
    if not functions:
        return f"{template} declares no function."
    width = max(len(name) for name in functions)
    lines = [f"functions of {template} (FUNCTION= of make invoke), with their sample events (-e, EVENT=):"]
    for name in functions:
        events = _sample_events(template, name)
        if len(events) > 1:
            samples = f"events/{events[0].partition('.')[0]}.*.json ({len(events)})"
        else:
            samples = "".join(f"events/{event}" for event in events)
        lines.append(f"  {name:<{width}}  {samples}".rstrip())
    return "\n".join(lines)


def _close_names(name: str, names: list[str]) -> str:
    """'; did you mean X?' for the names close to `name` (case, and the common "Function" suffix, aside), else ''."""

    def stem(text: str) -> str:
        lower = text.lower()
        return lower[: lower.find("func")] if "func" in lower else lower

    by_stem = {stem(candidate): candidate for candidate in names}
    wanted = stem(name)
    if wanted in by_stem:
        close = [wanted]
    else:
        close = difflib.get_close_matches(wanted, list(by_stem), n=3, cutoff=0.6)
        close += [s for s in by_stem if wanted and wanted in s and s not in close][: 3 - len(close)]
    return f"; did you mean {' or '.join(by_stem[c] for c in close)}?" if close else ""


def _unknown_function(name: str, names: list[str], where: str) -> UsageError:
    return UsageError(
        f"{PROG} invoke: no function {name!r} in {where}{_close_names(name, names)} "
        f"(`{PROG} invoke --help` lists its {len(names)} functions)"
    )


def _read_event(source: str | None) -> Any:
    """The event of `-e`: a JSON file, '-' for stdin, {} without one."""
    if source is None:
        return {}
    where = "stdin" if source == "-" else f"event file {source}"
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as exc:
        raise UsageError(f"{PROG} invoke: {where}: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{PROG} invoke: {where} is not JSON: {exc}") from exc


def _client(service: str, endpoint: str, region: str, read_timeout: float, attempts: int) -> Any:
    """A boto3 client on an offline cloud's endpoint (which accepts any credentials: these are no one's)."""
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id="localcloud",
        aws_secret_access_key="localcloud",  # noqa: S106 - the offline cloud takes any credential
        config=Config(
            connect_timeout=2, read_timeout=read_timeout, retries={"mode": "standard", "total_max_attempts": attempts}
        ),
    )


def find_running_cloud(endpoint: str, stack_name: str, region: str) -> RunningCloud | str:
    """The offline cloud at `endpoint` if one serves `stack_name` there, else why not (for the one line that says
    a fresh cloud is deployed instead)."""
    address = urlsplit(endpoint)
    if not address.hostname:
        raise UsageError(f"{PROG} invoke: {endpoint!r} is not an endpoint URL (http://host:port)")
    try:
        socket.create_connection((address.hostname, address.port or 80), timeout=2).close()
    except OSError:
        return f"no offline cloud at {endpoint}"
    cloudformation = _client("cloudformation", endpoint, region, read_timeout=30, attempts=1)
    functions = {}
    try:
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name):
            for resource in page["StackResourceSummaries"]:
                if resource["ResourceType"] == "AWS::Lambda::Function":
                    functions[resource["LogicalResourceId"]] = resource["PhysicalResourceId"]
    except ClientError:
        return f"{endpoint} answers but holds no stack {stack_name}"
    except BotoCoreError as exc:
        return f"{endpoint} answers but not as an offline cloud ({exc})"
    return RunningCloud(endpoint, stack_name, functions)


def invoke_running(cloud: RunningCloud, logical_id: str, event: Any, region: str) -> tuple[Any, bool]:
    """Lambda's Invoke on the running cloud, which runs it in that cloud's workers: the response, or Lambda's error
    payload and True if the invocation failed. Throttled invocations are tried again (as boto3 does)."""
    if logical_id not in cloud.functions:
        raise _unknown_function(
            logical_id, sorted(cloud.functions), f"the running offline cloud's stack {cloud.stack_name}"
        )
    lambda_ = _client("lambda", cloud.endpoint, region, read_timeout=INVOKE_READ_TIMEOUT_SECONDS, attempts=4)
    answer = lambda_.invoke(FunctionName=cloud.functions[logical_id], Payload=json.dumps(event).encode())
    payload = answer["Payload"].read()
    return (json.loads(payload) if payload else None), "FunctionError" in answer


def invoke(config: CloudConfig, clock: Clock, logical_id: str, event: Any) -> int:
    """`sam local invoke` without Docker, in a fresh offline cloud: the function's built artifact, in a worker. The
    response goes to stdout, the function's logs to stderr; a function error exits 1."""
    from localcloud.client import route_logs

    functions = template_functions(config.template)
    if logical_id not in functions:  # before a deploy, not after it
        raise _unknown_function(logical_id, functions, str(config.template))
    config, simulated = simulated_services(config, clock)
    cloud = LocalCloud(config, clock)
    route_logs(cloud.function_log)  # moto's warnings to the file; the function's own lines still echo on stderr
    with cloud:
        for simulator in simulated:
            cloud.add_simulator(simulator)
        deployed = sorted(r.logical_id for r in cloud.stack.of_type("AWS::Lambda::Function"))
        if logical_id not in deployed:  # a function behind a condition the parameters left false
            raise UsageError(
                f"{PROG} invoke: {logical_id} is in {config.template} but not deployed with these parameters "
                f"(its Condition is false; --parameter-overrides sets them)"
            )
        response, failed = cloud.invoke_function(logical_id, event)
    print(json.dumps(response), flush=True)
    return 1 if failed else 0


def invoke_command(args: argparse.Namespace, config: CloudConfig, clock: Clock, endpoint: str) -> int:
    """`invoke`: against the running offline cloud when one serves the stack at the endpoint (LOCALCLOUD_HOST and
    LOCALCLOUD_AWS_PORT, or --endpoint), as `sam local invoke` runs against the account; else in a fresh one. One
    line on stderr says which."""
    event = _read_event(args.event)
    name = args.function_identifier
    if not args.fresh:
        found = find_running_cloud(endpoint, config.stack_name, config.region)
        if isinstance(found, RunningCloud):
            if args.parameter_overrides:
                raise UsageError(
                    f"{PROG} invoke: --parameter-overrides needs a fresh cloud (--fresh); the running offline cloud "
                    f"at {endpoint} was deployed with its own"
                )
            if name in found.functions:
                _say(
                    f"invoking {name} on the running offline cloud at {endpoint} (stack {found.stack_name}: its "
                    "tables, its waiting tasks, the code it started with; the function's log lines print there)"
                )
            response, failed = invoke_running(found, name, event, config.region)
            print(json.dumps(response), flush=True)
            return 1 if failed else 0
        if args.endpoint:
            raise UsageError(f"{PROG} invoke: --endpoint {endpoint}: {found}")
        reason = f"{found}: "
    else:
        reason = "--fresh: "
    if name in template_functions(config.template):
        _say(
            f"{reason}invoking {name} in a fresh offline cloud deployed for this invocation (empty tables, no "
            "waiting tasks; run `make local` in another terminal to invoke against it)"
        )
    return invoke(config, clock, name, event)


def _parameter_overrides(text: str) -> dict[str, str]:
    """`Key=Value Key2=Value2` or SAM's `ParameterKey=Key,ParameterValue=Value ...`."""
    overrides = {}
    for item in text.split():
        if item.startswith("ParameterKey="):
            key, _, value = item.removeprefix("ParameterKey=").partition(",ParameterValue=")
        else:
            key, _, value = item.partition("=")
        if not key or "=" not in item:
            raise UsageError(f"{PROG} invoke: --parameter-overrides: {item!r} is not Key=Value")
        overrides[key] = value
    return overrides


def _ports_free(config: CloudConfig, command: str) -> None:
    """A port the cloud would serve on that another process holds (a `make local` already running) is bad input."""
    for port, variable in ((config.aws_port, "LOCALCLOUD_AWS_PORT"), (config.http_port, "LOCALCLOUD_HTTP_PORT")):
        if not port:
            continue
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
            try:
                probe.bind((config.host, port))
            except OSError as exc:
                why = "is in use (is a `make local` running?)" if exc.errno == errno.EADDRINUSE else exc.strerror
                raise UsageError(f"{command}: port {port} on {config.host} {why}; {variable} picks another") from exc


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _seed(name: str) -> Seed:
    """The function `--seed` names, as a Lambda Handler names one: module.function."""
    module, _, function = name.rpartition(".")
    try:
        seed: Seed = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"{PROG} serve: --seed {name}: {one_line(exc)}") from exc
    return seed


def cloud_arguments(parser: argparse.ArgumentParser) -> None:
    """-t and --speedup, as `serve` and the app's demo (tools/demo.py) take them."""
    parser.add_argument("-t", "--template", help="SAM template (default: LOCALCLOUD_TEMPLATE or template.yaml)")
    parser.add_argument(
        "--speedup", type=float, help="clock speed-up for schedules, simulated jobs and Step Functions timers"
    )


def cloud_config(command: str, args: argparse.Namespace, **overrides: Any) -> tuple[CloudConfig, Clock]:
    """The cloud the LOCALCLOUD_* settings, `overrides` and `args` (-t, --speedup: the last word) ask for, and the
    clock it runs on, with the offline cloud's logs at INFO under --verbose; a bad setting is a UsageError."""
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")
    if getattr(args, "template", None):
        overrides["template"] = Path(args.template)
    if getattr(args, "speedup", None) is not None:
        overrides["speedup"] = args.speedup
    for variable, kind in (("LOCALCLOUD_AWS_PORT", int), ("LOCALCLOUD_HTTP_PORT", int), ("LOCALCLOUD_SPEEDUP", float)):
        try:
            kind(os.environ.get(variable, "1"))
        except ValueError as exc:
            raise UsageError(f"{command}: {variable}={os.environ[variable]!r} is not a number") from exc
    try:
        config = CloudConfig.from_env(**overrides)
        return config, Clock(config.speedup)
    except ValueError as exc:  # a LOCALCLOUD_* setting or --speedup out of its range
        raise UsageError(f"{command}: {exc}") from exc


def serving_config(command: str, args: argparse.Namespace, **overrides: Any) -> tuple[CloudConfig, Clock]:
    """cloud_config, for a cloud that serves on its ports (`serve`, the app's demo): a missing template, or a port
    another process holds, is a UsageError too."""
    config, clock = cloud_config(command, args, **overrides)
    template_functions(config.template, command)
    _ports_free(config, command)
    return config, clock


def _build_parser(argv: list[str]) -> Parser:
    # The template whose functions `invoke --help` lists: -t's, else LOCALCLOUD_TEMPLATE's, else template.yaml.
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("-t", "--template")
    template = Path(pre.parse_known_args(argv)[0].template or os.environ.get("LOCALCLOUD_TEMPLATE", "template.yaml"))

    common = Parser(add_help=False)
    common.add_argument(
        "--verbose", action="store_true", default=argparse.SUPPRESS, help="the offline cloud's logs; tracebacks"
    )
    parser = Parser(
        prog=PROG,
        description=__doc__,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"`{PROG} invoke --help` lists the functions.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{serve,invoke}")
    description = "the offline cloud until Ctrl-C"
    server = commands.add_parser("serve", help=description, description=description, parents=[common])
    cloud_arguments(server)
    server.add_argument(
        "--seed",
        metavar="MODULE.FUNCTION",
        help="the app's sample data: FUNCTION(cloud) puts it in once the stack is up and returns a line for the banner "
        "(make local: tools.demo.sample_documents)",
    )
    running = "LOCALCLOUD_HOST and LOCALCLOUD_AWS_PORT: http://127.0.0.1:4566 by default"
    invoker = commands.add_parser(
        "invoke",
        help="invoke one function, as `sam local invoke`",
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="\n".join(
            textwrap.wrap(
                "Invoke one function and print its response (JSON) on stdout, nothing else; a function error exits 1. "
                f"It runs on the offline cloud `make local` is running ({running}): that cloud's tables and waiting "
                "tasks, as `sam local invoke` runs against the account. Without one, a fresh cloud is deployed for the "
                "one invocation. One line on stderr says which.",
                width=118,
            )
        ),
        epilog=_functions_epilog(template),
    )
    invoker.add_argument("function_identifier", metavar="FUNCTION", help="the function's logical ID in the template")
    invoker.add_argument("-e", "--event", help="JSON file with the event ('-' for stdin; default: {})")
    invoker.add_argument("-t", "--template", help="SAM template (default: LOCALCLOUD_TEMPLATE or template.yaml)")
    invoker.add_argument("--endpoint", help=f"the running offline cloud's AWS endpoint (default: {running})")
    invoker.add_argument("--fresh", action="store_true", help="always deploy a fresh cloud for the invocation")
    invoker.add_argument(
        "--parameter-overrides", default="", help="Key=Value ... (as `sam local invoke`; a fresh cloud's)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((arg for arg in argv if arg in ("serve", "invoke")), "")
    return run(_main, argv, f"{PROG} {command}".rstrip())


def _main(argv: list[str]) -> int:
    args = _build_parser(argv).parse_args(argv)
    command = f"{PROG} {args.command}"
    if args.command == "invoke":
        parameters = _parameter_overrides(args.parameter_overrides)
        config, clock = cloud_config(
            command, args, aws_port=0, http_port=0, echo_function_logs=True, parameters=parameters
        )
        running = CloudConfig.from_env()  # where a running cloud serves: LOCALCLOUD_HOST, LOCALCLOUD_AWS_PORT
        endpoint = args.endpoint or f"http://{running.host}:{running.aws_port}"
        return invoke_command(args, config, clock, endpoint)
    seed = _seed(args.seed) if args.seed else None
    config, clock = serving_config(command, args)
    config = replace(config, parameters={**_on_the_wall_clock(config), **config.parameters})
    return serve(config, clock, seed)


# Durations the functions or SQS measure on the wall clock, where the cloud's clock runs the Step Functions timers
# they must fit in (HeartbeatSeconds, ExportHeartbeatSeconds): at a speed-up they shrink with it.
WALL_CLOCK_PARAMETERS = ("ReconcileAfterSeconds", "ExportRecheckDelaySeconds")


def _on_the_wall_clock(config: CloudConfig) -> dict[str, str]:
    """The template's defaults of WALL_CLOCK_PARAMETERS divided by the speed-up (whole seconds, at least 1)."""
    if config.speedup == 1:
        return {}
    declared = yaml_parse(config.template.read_text()).get("Parameters", {})
    return {
        name: str(max(1, round(int(declared[name]["Default"]) / config.speedup)))
        for name in WALL_CLOCK_PARAMETERS
        if "Default" in declared.get(name, {})
    }


if __name__ == "__main__":
    sys.exit(main())
