"""`python -m localcloud serve` (make local) and `python -m localcloud demo` (make demo)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from dataclasses import replace

from localcloud.cloud import CloudConfig, LocalCloud
from localcloud.simulators import Simulator
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
    lines.append("  stack outputs:")
    lines += [f"    {key} = {value}" for key, value in sorted(cloud.stack.outputs.items())]
    return "\n".join(lines)


def _simulated_services(config: CloudConfig) -> tuple[CloudConfig, list[Simulator]]:
    """Simulated Translate, Macie and HealthLake (with one data store, which the stack's export workflow uses)."""
    region, speedup = config.region, config.speedup
    healthlake = HealthLakeSimulator(region, delay_seconds=120, speedup=speedup, file_count=3, records_per_file=20)
    parameters = {"HealthLakeDatastoreId": healthlake.create_datastore("callback-kit"), **config.parameters}
    simulated = [
        TranslateSimulator(region, delay_seconds=120, speedup=speedup),
        MacieSimulator(region, delay_seconds=180, speedup=speedup),
        healthlake,
    ]
    return replace(config, parameters=parameters), simulated


def serve(config: CloudConfig) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    config, simulated = _simulated_services(config)
    with LocalCloud(config) as cloud:
        for simulator in simulated:
            cloud.add_simulator(simulator)
        print(_banner(cloud), flush=True)
        print("Ctrl-C to stop.", flush=True)
        stop.wait()
    return 0


def demo(config: CloudConfig) -> int:
    from localcloud.demo import run_all

    config, simulated = _simulated_services(config)
    with LocalCloud(config) as cloud:
        for simulator in simulated:
            cloud.add_simulator(simulator)
        print(_banner(cloud), flush=True)
        return run_all(cloud)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcloud", description=__doc__)
    parser.add_argument("command", choices=["serve", "demo"])
    parser.add_argument("--template", help="SAM template (default: LOCALCLOUD_TEMPLATE or template.yaml)")
    parser.add_argument("--speedup", type=float, help="clock speed-up for schedules and simulated jobs")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    overrides: dict[str, object] = {}
    if args.template:
        from pathlib import Path

        overrides["template"] = Path(args.template)
    if args.speedup:
        overrides["speedup"] = args.speedup
    if args.command == "demo":
        # The demo runs beside a `make local` that may hold the default ports.
        overrides.setdefault("aws_port", 0)
        overrides.setdefault("http_port", 0)
        overrides.setdefault("speedup", 60.0)
        # Keep the handlers' INFO logs out of the walkthrough; let the reconciler look at jobs at once; re-check
        # exports every two seconds.
        overrides["parameters"] = {
            "LogLevel": "WARNING",
            "ReconcileAfterSeconds": "0",
            "ExportRecheckDelaySeconds": "2",
        }
    config = CloudConfig.from_env(**overrides)
    return serve(config) if args.command == "serve" else demo(config)


if __name__ == "__main__":
    sys.exit(main())
