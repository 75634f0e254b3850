"""anyio's two backends, for the tests of code that has a branch for each.

A module that imports :func:`anyio_backend` runs its anyio tests on asyncio and on trio
(``conftest.py`` gives asyncio alone)::

    from tests._backends import anyio_backend  # noqa: F401 - both anyio backends
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
import sniffio

T = TypeVar("T")

ANYIO_BACKENDS = ("asyncio", "trio")


@pytest.fixture(params=ANYIO_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


def run_on_a_loop_anyio_did_not_start(main: Callable[[], Awaitable[T]]) -> T:
    """``asyncio.run(main())`` as a host (or a Ray actor) runs its loop, in an empty context:
    nothing tells ``sniffio`` that the loop is anyio's (a test runner's context may)."""

    async def checked() -> T:
        assert sniffio.current_async_library_cvar.get() is None
        return await main()

    return contextvars.Context().run(asyncio.run, checked())
