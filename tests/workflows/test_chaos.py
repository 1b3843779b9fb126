"""Callback jobs under chaos (tests/bench/chaos.py, small): faults at the wire in every Lambda worker, lost, early,
duplicated, late, contrary and forged completion events; every job must still end once, as its job truly ended."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcloud.cloud import LocalCloud
from localcloud.lambda_faults import KINDS
from tests.bench.chaos import WIRE_FAULTS, ChaosResult, chaos_config, run_chaos

SEED = 14
JOBS = 100
# make chaos's faults, with crashes more frequent: a small run still crashes each function (registration, resume,
# reconciler) a few times, before and after its handler ran
WIRE = WIRE_FAULTS | {"crash": 0.05}


@pytest.fixture(scope="module")
def chaos() -> Iterator[ChaosResult]:
    """One chaos run of JOBS jobs, 20 in flight, on a cloud of its own (its workers inject faults)."""
    with LocalCloud(chaos_config(SEED, WIRE, stack_name="chaos-test")) as cloud:
        yield run_chaos(cloud, jobs=JOBS, in_flight=20, seed=SEED)


def test_every_job_ends_once_as_it_truly_ended_under_chaos(chaos: ChaosResult) -> None:
    # Given callback jobs whose AWS calls fail now and then, whose functions crash, and whose completion events are
    # lost, early, duplicated, late, contrary or forged
    # When every job has ended and the reconciler has looked at what was left waiting
    # Then no job is lost, none was resumed twice, and each execution ended as its job did (issue 14's target)
    assert (chaos.lost, chaos.double, chaos.wrong) == (0, 0, 0), chaos.summary() + f" wrong: {dict(chaos.wrong_ends)}"
    assert chaos.succeeded + chaos.failed == JOBS


def test_the_faults_were_injected(chaos: ChaosResult) -> None:
    # The run cannot pass by injecting nothing: every kind of wire fault fired in the workers (crashes before or after
    # the handler), and every kind of event fault was applied
    wire = {kind: chaos.wire[kind] for kind in KINDS}
    assert all(wire[kind] > 0 for kind in ("throttle", "server_error", "reset", "lost_answer")), wire
    assert wire["crash_before"] + wire["crash_after"] > 0, wire
    events = ("lost", "early", "duplicated", "late", "contrary", "forged_refused", "forged_custom")
    assert all(chaos.events[kind] > 0 for kind in events), dict(chaos.events)
    assert chaos.events["forged_accepted"] == 0
