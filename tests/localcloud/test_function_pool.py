"""How a function's workers are shared: an invocation never waits behind a cold start when a warm worker frees up.

The pool is driven with workers whose init and invocation the test holds and releases, so every step waits for a
positive signal, not for time to pass."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from localcloud.account import ESTABLISHED, NEW, Account, AccountProfile
from localcloud.runtime.lambdas import AccountConcurrency, FunctionPool, LambdaRuntime, Throttled
from tests.localcloud.simulated import wait_for


class HeldWorker:
    """A worker whose invocation returns its number, once its `release` is set."""

    def __init__(self, number: int) -> None:
        self.number, self.alive, self.release = number, True, threading.Event()
        self.release.set()

    def invoke(self, event: Any, request_id: str, arn: str) -> int:
        self.release.wait()
        return self.number

    def kill(self) -> None:
        self.alive = False


def test_an_invocation_takes_the_warm_worker_freed_while_its_cold_start_is_still_running() -> None:
    second_init = threading.Event()
    workers: list[HeldWorker] = []

    def start_worker(spec: Any) -> HeldWorker:
        worker = HeldWorker(len(workers) + 1)
        workers.append(worker)
        if worker.number == 2:
            second_init.wait()  # the second environment's init runs until the test lets it end
        return worker

    pool = FunctionPool(SimpleNamespace(name="fn", arn="arn:fn"), limit=10, start_worker=start_worker)  # type: ignore[arg-type]
    assert pool.invoke({}, wait=False) == 1  # a cold start, then warm
    # Given the warm worker busy with an invocation
    workers[0].release.clear()
    results: dict[str, int] = {}
    first = threading.Thread(target=lambda: results.update(first=pool.invoke({}, wait=False)))
    first.start()
    wait_for(lambda: pool.in_flight == 1, timeout=10, what="the first invocation")
    # When a second invocation arrives and a second environment starts for it
    second = threading.Thread(target=lambda: results.update(second=pool.invoke({}, wait=False)))
    second.start()
    wait_for(lambda: len(workers) == 2, timeout=10, what="the second environment's init")
    # And the warm worker finishes its invocation while that init still runs
    workers[0].release.set()
    second.join(timeout=10)
    # Then the second invocation ran on the warm worker, without waiting for the cold start
    assert results == {"first": 1, "second": 1}
    assert not second_init.is_set()
    # And the new environment joins the pool when its init ends
    second_init.set()
    wait_for(lambda: pool.in_flight == 0, timeout=10, what="the second environment")
    assert pool.cold_starts == 2
    first.join(timeout=10)


def _burst(invocations: int, starts_at_once: int, most: int) -> tuple[int, int]:
    """A burst of invocations of a function with no environment yet, each held until every one has a worker; the
    environments started, and the most whose inits ran at once (the first ones' inits held until that many run)."""
    inits = threading.Condition()
    active, top, inits_held = [0], [0], [True]
    workers: list[HeldWorker] = []

    def start_worker(spec: Any) -> HeldWorker:
        with inits:
            active[0] += 1
            top[0] = max(top[0], active[0])
            inits.notify_all()
            inits.wait_for(lambda: not inits_held[0])  # the inits run until the test lets them end
            active[0] -= 1
            worker = HeldWorker(len(workers) + 1)
            worker.release.clear()  # each invocation runs until the test releases it
            workers.append(worker)
            return worker

    pool = FunctionPool(
        SimpleNamespace(name="fn", arn="arn:fn"),  # type: ignore[arg-type]
        limit=10,
        start_worker=start_worker,
        starts_at_once=starts_at_once,
        most=most,
    )
    results: list[int] = []
    burst = [threading.Thread(target=lambda: results.append(pool.invoke({}, False))) for _ in range(invocations)]
    for invocation in burst:
        invocation.start()
    with inits:
        assert inits.wait_for(lambda: active[0] == min(starts_at_once, most), timeout=10)
        inits_held[0] = False
        inits.notify_all()
    wait_for(lambda: len(workers) == min(invocations, most), timeout=10, what="the environments of the burst")
    for worker in workers:
        worker.release.set()
    for invocation in burst:
        invocation.join(timeout=10)
    assert len(results) == invocations
    return pool.cold_starts, top[0]


def test_a_burst_starts_an_environment_per_invocation_several_at_once() -> None:
    # Given a function with no environment yet, allowed three starts at a time
    # When a burst of five invocations arrives
    # Then three environments start at once, and then the other two: each invocation had one started for it
    assert _burst(invocations=5, starts_at_once=3, most=10) == (5, 3)


def test_a_burst_larger_than_the_pool_may_grow_waits_for_the_environments_there_are() -> None:
    # Given a function whose pool grows to two environments here
    # When a burst of five invocations arrives
    # Then two environments start, and all five invocations are served by them
    assert _burst(invocations=5, starts_at_once=3, most=2) == (2, 2)


def test_known_gap_invocations_past_a_pool_smaller_than_the_limit_wait_where_aws_throttles() -> None:
    worker = HeldWorker(1)
    worker.release.clear()
    pool = FunctionPool(SimpleNamespace(name="fn", arn="arn:fn"), limit=2, start_worker=lambda spec: worker, most=1)  # type: ignore[arg-type]
    outcomes: list[Any] = []

    def invoke() -> None:
        try:
            outcomes.append(pool.invoke({}, wait=False))
        except Throttled as exc:
            outcomes.append(exc)

    # Given a function whose limit (2) is above what its pool grows to here (one environment)
    # When three synchronous invocations run at once, one past the limit
    burst = [threading.Thread(target=invoke) for _ in range(3)]
    for invocation in burst:
        invocation.start()
    wait_for(lambda: pool.in_flight == 1 and pool.waiting == 2, timeout=10, what="one running, two waiting")
    worker.release.set()
    for invocation in burst:
        invocation.join(timeout=10)
    # Then all three run in turn on the one environment, where AWS throttles the third (docs/offline-cloud.md, "Not
    # enforced yet")
    assert outcomes == [1, 1, 1]


def test_an_invocation_waiting_for_a_worker_fails_when_the_cloud_stops() -> None:
    init = threading.Event()

    def start_worker(spec: Any) -> HeldWorker:
        init.wait()  # the only environment's init runs until the test lets it end
        return HeldWorker(1)

    pool = FunctionPool(SimpleNamespace(name="fn", arn="arn:fn"), limit=1, start_worker=start_worker)  # type: ignore[arg-type]
    failures: list[Exception] = []

    def invoke() -> None:
        try:
            pool.invoke({}, wait=True)
        except RuntimeError as exc:
            failures.append(exc)

    # Given an invocation waiting for a worker that is still starting
    waiting = threading.Thread(target=invoke)
    waiting.start()
    wait_for(lambda: pool.in_flight == 1, timeout=10, what="the environment to start")
    # When the cloud stops, and the init then ends
    pool.stop()
    init.set()
    waiting.join(timeout=10)
    # Then the invocation fails instead of starting environments for a stopped cloud
    assert [str(f) for f in failures] == ["fn: the offline cloud has stopped"]
    wait_for(lambda: pool.in_flight == 0, timeout=10, what="the started environment to end")
    assert pool.cold_starts == 1


def _second_invocation_while_the_first_starts() -> tuple[Any, Any, int]:
    """A function with reserved concurrency 1: a first invocation starts its environment and runs until released;
    a second arrives once the first is in flight (during the init, or just after it ended). Returns both outcomes
    and the cold starts."""
    workers: list[HeldWorker] = []

    def start_worker(spec: Any) -> HeldWorker:
        worker = HeldWorker(len(workers) + 1)
        worker.release.clear()  # each invocation runs until the test releases it
        workers.append(worker)
        return worker

    pool = FunctionPool(SimpleNamespace(name="fn", arn="arn:fn"), limit=1, start_worker=start_worker)  # type: ignore[arg-type]
    outcomes: dict[str, Any] = {}

    def invoke(name: str) -> None:
        try:
            outcomes[name] = pool.invoke({}, wait=False)
        except Throttled as exc:
            outcomes[name] = exc

    first = threading.Thread(target=invoke, args=("first",))
    first.start()
    wait_for(lambda: pool.in_flight == 1, timeout=10, what="the first invocation")
    second = threading.Thread(target=invoke, args=("second",))
    second.start()
    # one of the two is refused at once; the other holds the environment until it is released
    wait_for(lambda: outcomes != {} and workers != [], timeout=10, what="one invocation throttled")
    workers[0].release.set()
    for thread in (first, second):
        thread.join(timeout=10)
    pool.stop()
    return outcomes["first"], outcomes["second"], pool.cold_starts


def test_the_environment_started_for_an_invocation_is_its_own_and_a_later_one_is_throttled() -> None:
    # Given a function with reserved concurrency 1 whose environment starts for a first invocation, and a second
    # invocation arriving while the first holds it (many times over: at any point of the start, before or after the
    # init ends)
    for _ in range(300):
        first, second, cold_starts = _second_invocation_while_the_first_starts()
        # Then the second is throttled, and the first runs in the environment started for it
        assert isinstance(second, Throttled)
        assert (first, cold_starts) == (1, 1)


def test_functions_without_a_reservation_share_the_accounts_unreserved_concurrency() -> None:
    # Given two functions of a new account (quota 10, nothing reserved), with 6 and 4 invocations running
    unreserved = AccountConcurrency(limit=10)
    workers: list[HeldWorker] = []

    def start_worker(spec: Any) -> HeldWorker:
        worker = HeldWorker(len(workers) + 1)
        worker.release.clear()  # every invocation runs until the test ends it
        workers.append(worker)
        return worker

    pools = [
        FunctionPool(SimpleNamespace(name=name, arn=f"arn:{name}"), 1000, start_worker, account=unreserved)  # type: ignore[arg-type]
        for name in ("resume", "register")
    ]
    running = [threading.Thread(target=pools[0].invoke, args=({}, False)) for _ in range(6)]
    running += [threading.Thread(target=pools[1].invoke, args=({}, False)) for _ in range(4)]
    for thread in running:
        thread.start()
    wait_for(lambda: len(workers) == 10, timeout=10, what="ten invocations running")
    # When each function is invoked once more, synchronously, though each is far below its own limit
    # Then both are throttled, as Lambda throttles the account's eleventh concurrent execution
    for pool in pools:
        with pytest.raises(Throttled, match="Rate Exceeded"):
            pool.invoke({}, wait=False)
    # And an asynchronous invocation waits for a free execution, then runs on it
    queued: list[int] = []
    later = threading.Thread(target=lambda: queued.append(pools[1].invoke({}, wait=True)))
    later.start()
    wait_for(lambda: unreserved.waiting == 1, timeout=10, what="the queued invocation waiting")
    assert queued == [] and len(workers) == 10
    workers[0].release.set()  # one of the first function's invocations ends
    wait_for(lambda: len(workers) == 11, timeout=10, what="the queued invocation's environment")
    workers[10].release.set()
    later.join(timeout=10)
    assert queued == [11]
    for worker in workers:
        worker.release.set()
    for thread in running:
        thread.join(timeout=10)


@pytest.mark.parametrize(("profile", "unreserved"), [(NEW, 10), (ESTABLISHED, 1000)])
def test_the_runtime_shares_the_quota_of_its_accounts_profile(profile: AccountProfile, unreserved: int) -> None:
    assert LambdaRuntime(Path("."), "us-east-1", Account(profile)).unreserved.limit == unreserved
