"""The offline cloud's one clock: schedules, simulated jobs and the Step Functions timers all read it.

`Clock(speedup)` is virtual time that starts at the wall-clock time and runs `speedup` times faster than real time
(the demo runs a two-minute Translate job in two seconds at 60x). `ManualClock` moves only when a test calls
`advance()`: a Wait of an hour, a TimeoutSeconds, a HeartbeatSeconds or a simulated job's delay falls due the moment
the test says so, so no test races the wall clock or sleeps to let time pass.

Every timed wait goes through `Clock.wait(event, seconds)`: wait for `event` to be set, at most `seconds` of this
clock's time. localcloud/fixes/patches.py routes the Step Functions interpreter's waits through it (gap 19).
"""

from __future__ import annotations

import functools
import threading
import time
import types
from collections.abc import Callable
from datetime import UTC, datetime, timedelta


class Clock:
    def __init__(self, speedup: float = 1.0) -> None:
        if speedup <= 0:
            raise ValueError(f"speedup must be positive, not {speedup}")
        self.speedup = speedup
        self._start_real, self._start_virtual = time.monotonic(), datetime.now(UTC)

    def now(self) -> datetime:
        return self._start_virtual + timedelta(seconds=(time.monotonic() - self._start_real) * self.speedup)

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        """Wait until `event` is set or `seconds` of clock time have passed; whether it was set."""
        # threading.Event's own wait: `event` may be this clock's ClockEvent, whose wait comes here
        return threading.Event.wait(event, None if seconds is None else max(0.0, seconds) / self.speedup)

    def sleep(self, seconds: float) -> None:
        self.wait(threading.Event(), seconds)

    def call_later(self, seconds: float, action: Callable[[], None]) -> Timer:
        """Run `action` on a daemon thread after `seconds` of clock time, unless cancelled first."""
        return Timer(self, seconds, action)

    @functools.cached_property
    def event_class(self) -> type[threading.Event]:
        """threading.Event whose timed waits run on this clock (what the interpreter's waits are made of)."""
        clock = self

        class ClockEvent(threading.Event):
            sets = 0  # how often it was set: a waiter must see a set() even if clear() came right after

            def wait(self, timeout: float | None = None) -> bool:
                return clock.wait(self, timeout) if timeout is not None else super().wait()

            def set(self) -> None:
                super().set()
                clock.was_set(self)

        return ClockEvent

    def threading_module(self) -> types.ModuleType:
        """The threading module as a module that creates this clock's events sees it."""
        module = types.ModuleType("threading")
        module.__dict__.update(vars(threading))
        module.Event = self.event_class  # type: ignore[attr-defined]
        return module

    def time_module(self) -> types.ModuleType:
        """The time module as a module that measures or sleeps through time on this clock sees it."""
        module = types.ModuleType("time")
        module.__dict__.update(vars(time))
        module.time = lambda: self.now().timestamp()  # type: ignore[attr-defined]
        module.sleep = self.sleep  # type: ignore[attr-defined]
        return module

    def was_set(self, event: threading.Event) -> None:
        """One of this clock's events was set (moto sets and clears some at once: a manual clock counts the sets)."""


class Timer:
    """An action due after some clock time, on a thread of its own (threading.Timer, on a clock)."""

    def __init__(self, clock: Clock, seconds: float, action: Callable[[], None]) -> None:
        self._cancelled = threading.Event()

        def run() -> None:
            if not clock.wait(self._cancelled, seconds):
                action()

        self.thread = threading.Thread(target=run, name="localcloud-timer", daemon=True)
        self.thread.start()

    def cancel(self) -> None:
        self._cancelled.set()

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the action to have run (or been cancelled); not from the timer's own thread."""
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)


class ManualClock(Clock):
    """Time that moves only when `advance` is called; waits in other threads end when their time has come."""

    def __init__(self, start: datetime | None = None) -> None:
        super().__init__()
        self._now = start or datetime.now(UTC)
        self._changed = threading.Condition()
        self._looked: dict[int, datetime] = {}  # waiting thread -> the time it last saw, for `waiting_at`

    def now(self) -> datetime:
        with self._changed:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._changed:
            self._now += timedelta(seconds=seconds)
            self._changed.notify_all()

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        me = threading.get_ident()
        with self._changed:
            deadline = None if seconds is None else self._now + timedelta(seconds=max(0.0, seconds))
            sets = getattr(event, "sets", 0)

            def woken() -> bool:
                return event.is_set() or getattr(event, "sets", 0) != sets

            try:
                # A set() of an event that is not one of this clock's is not announced: look again now and then.
                while not woken() and (deadline is None or self._now < deadline):
                    if self._looked.get(me) != self._now:  # announce a new look only (`armed`, `waiting_at`)
                        self._looked[me] = self._now
                        self._changed.notify_all()
                    self._changed.wait(0.05)
            finally:
                self._looked.pop(me, None)
            return woken()

    def armed(self, count: int = 1, timeout: float = 10.0) -> None:
        """Block until `count` timed waits are in progress: a timer that starts after an `advance` counts from the
        time it starts, so a test arms what it means to move past before it advances."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._looked) < count:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(self._looked)} of {count} timed waits armed after {timeout} s")
                self._changed.wait(0.05)

    def waiting_at(self, moment: datetime) -> int:
        """How many waits have seen the clock at `moment` or later and are still waiting: after `advance`, the
        positive signal that a timer not yet due has looked at the new time and gone on waiting."""
        with self._changed:
            return sum(1 for seen in self._looked.values() if seen >= moment)

    def was_set(self, event: threading.Event) -> None:
        with self._changed:
            event.sets += 1  # type: ignore[attr-defined]
            self._changed.notify_all()
