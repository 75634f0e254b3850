"""The waterfall runner and disposers, tested alone."""

from __future__ import annotations

from typing import Any

import pytest

from ptc._calls._events import Disposer, ListenerError, run_waterfall

pytestmark = pytest.mark.anyio


async def terminal(payload: Any) -> str:
    return "terminal"


async def test_waterfall_order_and_delegation() -> None:
    order: list[str] = []

    def make(label: str, delegate: bool) -> Any:
        async def listener(payload: Any, nxt: Any) -> Any:
            order.append(label)
            return await nxt() if delegate else label

        return listener

    listeners = [make("a", True), make("b", True), make("c", False)]
    assert await run_waterfall(listeners, None, terminal, lambda d: True) == "c"
    assert order == ["a", "b", "c"]
    assert await run_waterfall([], None, terminal, lambda d: True) == "terminal"


async def test_errors_and_invalid_decisions_name_the_listener() -> None:
    async def raises(payload: Any, nxt: Any) -> Any:
        raise KeyError("x")

    async def invalid(payload: Any, nxt: Any) -> Any:
        return 42

    with pytest.raises(ListenerError, match="raises"):
        await run_waterfall([raises], None, terminal, lambda d: True)
    with pytest.raises(ListenerError, match="invalid returned invalid 42"):
        await run_waterfall([invalid], None, terminal, lambda d: isinstance(d, str))


async def test_next_hands_on_an_amended_payload_only_where_the_event_allows_it() -> None:
    async def swap(payload: Any, nxt: Any) -> Any:
        return await nxt(value=payload + 1)

    async def echo(payload: Any) -> Any:
        return payload

    def amend(payload: int, changes: dict[str, object]) -> int:
        value = changes["value"]
        assert isinstance(value, int)
        return value

    assert await run_waterfall([swap, swap], 1, echo, lambda d: True, amend=amend) == 3
    with pytest.raises(ListenerError, match="takes no arguments"):
        await run_waterfall([swap], 1, echo, lambda d: True)


def test_disposers_are_idempotent() -> None:
    calls: list[int] = []
    dispose = Disposer(lambda: calls.append(1))
    dispose()
    dispose()
    assert calls == [1] and dispose.disposed
