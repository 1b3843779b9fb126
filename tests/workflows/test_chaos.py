"""Callback jobs under chaos (bench/chaos.py, small): faults at the wire in every Lambda worker, lost, early,
duplicated, late, contrary and forged completion events; every job must still end once, as its job truly ended,
whether a Step Functions task or a durable function's callback (DocumentsDurableFunction, a tenth of the jobs) waits.

The run is `make chaos` at a small size, in a process of its own: its offline cloud (whose workers inject faults)
shares nothing with the session's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.chaos import WIRE_FAULTS
from localcloud.runtime.lambda_faults import KINDS

ROOT = Path(__file__).resolve().parents[2]
SEED = 14
JOBS = 100
# make chaos's faults, with crashes more frequent: a small run still crashes each function (registration, resume,
# reconciler) a few times, before and after its handler ran
WIRE = WIRE_FAULTS | {"crash": 0.05}


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of one chaos run of JOBS jobs, 20 in flight."""
    out = tmp_path_factory.mktemp("chaos") / "chaos.json"
    command = [sys.executable, "-m", "bench.chaos", "--jobs", str(JOBS), "--seed", str(SEED), "--in-flight", "20"]
    run = subprocess.run(
        [*command, "--wire", json.dumps(WIRE), "--out", str(out)],
        cwd=ROOT,
        # the report imports the functions' code (src/) as make chaos does (the Makefile's PYTHONPATH)
        env=os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.exists(), run.stdout[-2000:] + run.stderr[-4000:]
    report: dict[str, Any] = json.loads(out.read_text())
    report["summary"] = run.stdout.strip()
    return report


def test_every_job_ends_once_as_it_truly_ended_under_chaos(chaos: dict[str, Any]) -> None:
    # Given callback jobs whose AWS calls fail now and then, whose functions crash, and whose completion events are
    # lost, early, duplicated, late, contrary or forged
    # When every job has ended and the reconciler has looked at what was left waiting
    # Then no job is lost, none was resumed twice, and each execution ended as its job did (issue 14's target), the
    # durable waiters' executions included (issue 29: the totals count them)
    found, durable = (chaos["lost"], chaos["double"], chaos["wrong"]), chaos["durable"]
    wrong = f"wrong: {chaos['wrong_ends']} durable wrong: {durable['wrong_ends']}"
    assert found == (0, 0, 0), f"{chaos['summary']} {wrong} dead letters: {chaos['dead_letters']}"
    assert chaos["succeeded"] + chaos["failed"] == JOBS
    assert durable["jobs"] > 0 and durable["succeeded"] + durable["failed"] == durable["jobs"], durable


def test_the_faults_were_injected(chaos: dict[str, Any]) -> None:
    # The run cannot pass by injecting nothing: every kind of wire fault fired in the workers (crashes before or after
    # the handler), and every kind of event fault was applied
    wire = {kind: chaos["wire"].get(kind, 0) for kind in KINDS}
    assert all(wire[kind] > 0 for kind in ("throttle", "server_error", "reset", "lost_answer")), wire
    assert wire["crash_before"] + wire["crash_after"] > 0, wire
    events = ("lost", "early", "duplicated", "late", "contrary", "forged_refused", "forged_custom")
    assert all(chaos["events"].get(kind, 0) > 0 for kind in events), chaos["events"]
    assert chaos["events"].get("forged_accepted", 0) == 0
