"""Generation gives the GIL away inside ``yielding_gil`` (and only there), per thread.

Nothing is timed: a clock that advances a second per reading makes every pause due, and
the sleeps that give the GIL away are counted.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

import sdkgen
from sdkgen import _pacing

from .cases import all_specs


class Clock:
    """A clock a second ahead at every reading; the zero-second sleeps it was asked for."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[tuple[float, str]] = []

    def perf_counter(self) -> float:
        self.now += 1.0
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append((seconds, threading.current_thread().name))
        time.sleep(seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    namespace = SimpleNamespace(perf_counter=fake.perf_counter, sleep=fake.sleep)
    monkeypatch.setattr(_pacing, "time", namespace)
    return fake


def test_a_generation_pauses_at_every_tool_inside_yielding_gil(clock: Clock) -> None:
    specs = all_specs()
    generator = sdkgen.SdkGenerator(frozen_specs=True)
    plain = generator.generate(specs)
    assert clock.sleeps == []  # outside the block: never
    with sdkgen.yielding_gil(every=0.5):
        paced = generator.generate(specs)
    # Due at every pause (the fake clock moves a second per reading): each tool's turn
    # in assembly, rendering and bindings gave the GIL away with a zero-second sleep.
    assert len(clock.sleeps) >= 3 * len(specs)
    assert {seconds for seconds, _ in clock.sleeps} == {0}
    assert paced == plain  # pacing changes when the work runs, never what it makes
    count = len(clock.sleeps)
    generator.stub(specs, {specs[0].name})
    assert len(clock.sleeps) == count  # the block has ended


def test_yielding_gil_is_per_thread_and_nests(clock: Clock) -> None:
    specs = all_specs()
    generator = sdkgen.SdkGenerator(frozen_specs=True)
    generator.generate(specs)  # warm: the thread below renders from the caches
    with sdkgen.yielding_gil():
        with sdkgen.yielding_gil(every=0.5):
            pass
        other = threading.Thread(target=generator.generate, args=(specs,), name="other")
        other.start()
        other.join()
        assert [name for _, name in clock.sleeps] == []  # another thread is not paced
        generator.generate(specs)  # the outer block still holds here
    assert clock.sleeps and {name for _, name in clock.sleeps} == {"MainThread"}
