"""Shared test configuration: async tests run on anyio's asyncio backend."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True, scope="session")
def _private_sdk_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """SDK fragments go to a cache of this test session, never the user's cache dir."""
    previous = os.environ.get("PTC_CACHE_DIR")
    os.environ["PTC_CACHE_DIR"] = str(tmp_path_factory.mktemp("ptc-cache"))
    yield
    if previous is None:
        os.environ.pop("PTC_CACHE_DIR", None)
    else:
        os.environ["PTC_CACHE_DIR"] = previous
