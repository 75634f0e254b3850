"""A recording fake of sdkgen's Transport for tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sdkgen

Answer = Callable[[str, dict[str, Any]], tuple[bool, Any]]


class FakeTransport:
    """Records every batch; answers each call with ``answer(name, arguments)``."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.batches: list[list[tuple[str, dict[str, Any]]]] = []
        self._answer = answer or (lambda name, args: (True, {"tool": name, "args": args}))

    def call_batch(self, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, Any]]:
        self.batches.append(calls)
        return [self._answer(name, args) for name, args in calls]


def load_module(sdk: sdkgen.Sdk, transport: FakeTransport) -> dict[str, Any]:
    """Execute the worker module the way the worker does; return its namespace."""
    ns: dict[str, Any] = {"__transport__": transport}
    exec(compile(sdk.module, "<sdk>", "exec"), ns)
    return ns
