"""Callback jobs under load on the offline cloud: nothing lost, nothing resumed twice (bench/callbacks.py)."""

from bench.callbacks import run_jobs
from localcloud.cloud import LocalCloud


def test_two_hundred_callback_jobs_twenty_in_flight_all_end_exactly_once(cloud: LocalCloud) -> None:
    # Given 200 callback jobs, 20 at a time, a fifth of them completing before their token is registered
    # When each job's completion event arrives
    result = run_jobs(cloud, jobs=200, in_flight=20)
    # Then every workflow was resumed, once, and nothing went to the dead-letter queue
    assert (result.lost, result.duplicated, result.failed, result.dead_letters) == (0, 0, 0, 0), result.as_dict()
    assert result.succeeded == 200
