"""`python -m localcloud serve` (make local), `demo` (make demo) and `invoke` (make invoke: `sam local invoke`
without Docker)."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from samtranslator.yaml_helper import yaml_parse

from localcloud import account
from localcloud.clock import Clock
from localcloud.cloud import CloudConfig, LocalCloud, log_path
from localcloud.simulators import Simulator
from localcloud.simulators.bda import BdaSimulator
from localcloud.simulators.healthlake import HealthLakeSimulator
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.translate import TranslateSimulator


def _banner(cloud: LocalCloud) -> str:
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


def _simulated_services(config: CloudConfig, clock: Clock) -> tuple[CloudConfig, list[Simulator]]:
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


def serve(config: CloudConfig) -> int:
    """The offline cloud until Ctrl-C: function logs on stderr (prefixed with the function's name) and in the log
    file, moto's and werkzeug's only in the file; sample documents seeded for the README's documents task."""
    from localcloud.demo import DOCUMENTS, route_logs, seed_documents

    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    clock = Clock(config.speedup)
    config, simulated = _simulated_services(replace(config, echo_function_logs=True), clock)
    cloud = LocalCloud(config, clock)
    route_logs(cloud.function_log)
    with cloud:
        for simulator in simulated:
            cloud.add_simulator(simulator)
        seeded = seed_documents(cloud)
        print(_banner(cloud), flush=True)
        print(f"  sample documents {seeded}{{{','.join(DOCUMENTS)}}}   (the README's documents task)", flush=True)
        print("Ctrl-C to stop.", flush=True)
        stop.wait()
    return 0


def demo(config: CloudConfig) -> int:
    """Every workflow end to end, showing only progress and a summary: the functions' logs, moto's, werkzeug's and
    warnings go to a log file of the demo's own (emptied first, apart from a `make local`'s), whose path it prints."""
    from localcloud.demo import route_logs, run_all

    log_file = config.function_log or log_path(config.template, f"{config.stack_name}-demo")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text("")
    clock = Clock(config.speedup)
    # The BDA quota of most Regions (5, not us-east-1's 25), so that the extract flow's 40 documents wait for it.
    parameters = {"DataAutomationMaxConcurrentJobs": "5", **config.parameters}
    config, simulated = _simulated_services(replace(config, function_log=log_file, parameters=parameters), clock)
    route_logs(log_file)
    with LocalCloud(config, clock) as cloud:
        for simulator in simulated:
            cloud.add_simulator(simulator)
        print(_banner(cloud), flush=True)
        code = run_all(cloud)
    print(f"Logs: {log_file}")
    return code


def invoke(config: CloudConfig, logical_id: str, event: Any) -> int:
    """`sam local invoke` without Docker: the function's built artifact, in a worker, against the offline cloud.
    The response goes to stdout, the function's logs to stderr; a function error exits 1."""
    from localcloud.demo import route_logs

    clock = Clock(config.speedup)
    config, simulated = _simulated_services(config, clock)
    cloud = LocalCloud(config, clock)
    route_logs(cloud.function_log)  # moto's warnings to the file; the function's own lines still echo on stderr
    with cloud:
        for simulator in simulated:
            cloud.add_simulator(simulator)
        response, failed = cloud.invoke_function(logical_id, event)
    print(json.dumps(response))
    return 1 if failed else 0


def _parameter_overrides(text: str) -> dict[str, str]:
    """`Key=Value Key2=Value2` or SAM's `ParameterKey=Key,ParameterValue=Value ...`."""
    overrides = {}
    for item in text.split():
        if item.startswith("ParameterKey="):
            key, _, value = item.removeprefix("ParameterKey=").partition(",ParameterValue=")
        else:
            key, _, value = item.partition("=")
        overrides[key] = value
    return overrides


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcloud", description=__doc__)
    parser.add_argument("--verbose", action="store_true")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, description in (("serve", "the offline cloud until Ctrl-C"), ("demo", "every workflow end to end")):
        command = commands.add_parser(name, help=description)
        command.add_argument("-t", "--template", help="SAM template (default: LOCALCLOUD_TEMPLATE or template.yaml)")
        command.add_argument(
            "--speedup", type=float, help="clock speed-up for schedules, simulated jobs and Step Functions timers"
        )
    invoker = commands.add_parser("invoke", help="invoke one function's built artifact, as `sam local invoke`")
    invoker.add_argument("function_identifier", help="the function's logical ID in the template")
    invoker.add_argument("-e", "--event", help="JSON file with the event ('-' for stdin; default: {})")
    invoker.add_argument("-t", "--template", help="SAM template (default: LOCALCLOUD_TEMPLATE or template.yaml)")
    invoker.add_argument("--parameter-overrides", default="", help="Key=Value ... (as `sam local invoke`)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    overrides: dict[str, Any] = {}
    if args.template:
        overrides["template"] = Path(args.template)
    if getattr(args, "speedup", None):
        overrides["speedup"] = args.speedup
    if args.command == "invoke":
        overrides.update(aws_port=0, http_port=0, echo_function_logs=True)
        overrides["parameters"] = _parameter_overrides(args.parameter_overrides)
        source = sys.stdin.read() if args.event == "-" else Path(args.event).read_text() if args.event else "{}"
        return invoke(CloudConfig.from_env(**overrides), args.function_identifier, json.loads(source))
    if args.command == "demo":
        # The demo runs beside a `make local` that may hold the default ports.
        overrides.setdefault("aws_port", 0)
        overrides.setdefault("http_port", 0)
        overrides.setdefault("speedup", 60.0)
        # Keep the handlers' INFO logs out of the walkthrough; let the reconciler look at jobs at once; re-check
        # exports every two seconds.
        overrides["parameters"] = {
            "LogLevel": "WARN",
            "ReconcileAfterSeconds": "0",
            "ExportRecheckDelaySeconds": "2",
        }
    config = CloudConfig.from_env(**overrides)
    if args.command == "serve":
        config = replace(config, parameters={**_on_the_wall_clock(config), **config.parameters})
    return serve(config) if args.command == "serve" else demo(config)


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
