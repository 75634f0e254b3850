"""Shared test configuration: async tests run on anyio's asyncio backend; a private SDK
cache; ``needs_root`` skips (saying why) what a host without root or cgroups cannot run;
``envsim`` runs host scripts in the reference environments (``tests/environments``)."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest

from tests import environments
from worker import Containment, SubprocessBackend


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


@pytest.fixture(scope="session")
def envsim() -> environments.Harness:
    """The environments harness (test user and venv made once); skips, saying why, where it
    cannot run (not root, no system Python, no writable cgroup v2)."""
    reason = environments.unavailable()
    if reason is not None:
        pytest.skip(reason)
    return environments.harness()


@functools.cache
def full_containment_unavailable() -> str | None:
    """Why this host cannot run real contained children at full containment, or ``None``.

    Per-run cgroups (memory, pids, ``cgroup.kill``) and the drop to uid 65534 need root here;
    namespaces, Landlock and seccomp need a kernel that has them.
    """
    if os.geteuid() != 0:
        return (
            f"needs root (running as uid {os.geteuid()}): per-run cgroups and the uid drop "
            "are root-only on this host; the unprivileged path is covered by tests that drop "
            "privileges in a child"
        )
    short = {
        dim: report
        for dim, report in SubprocessBackend(Containment()).probe().items()
        if report.level != "full"
    }
    if short:
        gaps = "; ".join(f"{d} is {r.level} ({r.gap or r.mechanism})" for d, r in short.items())
        return f"needs full containment, which this host lacks: {gaps}"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("needs_root") is not None:
        reason = full_containment_unavailable()
        if reason is not None:
            pytest.skip(reason)
