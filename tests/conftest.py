"""Shared test configuration: async tests run on anyio's asyncio backend; a private SDK
cache; ``needs_root`` skips (saying why) what a host without root or cgroups cannot run;
``envsim`` runs host scripts in the reference environments (``tests/environments``); the
hypothesis profile named by ``PTC_HYPOTHESIS_PROFILE`` (``make test`` sets ``ci``); a
private temp dir per test process; tests sharing a module-wide fixture grouped for xdist."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests import environments
from worker import Containment, SubprocessBackend

# `make test` (and so CI) runs the properties as a fixed set of examples: the same examples on
# every run, so a red run is red again when rerun; no deadline (a loaded machine is no bug);
# no example database; a failure prints the blob that reproduces it. Plain `pytest` draws
# random examples (where CI is set, hypothesis loads its "ci" profile itself: this one).
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    max_examples=100,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
if profile := os.environ.get("PTC_HYPOTHESIS_PROFILE"):
    settings.load_profile(profile)


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


@pytest.fixture(autouse=True, scope="session")
def _private_temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Temporary files, the runs' scratch dirs among them, go to a directory of this test
    process (its children inherit ``TMPDIR``), never the shared one: a test that counts what
    ptc left there counts its own, beside other hosts on the machine and the other
    pytest-xdist workers. Readable by all (contained children run as other users)."""
    tmp_path_factory.getbasetemp()  # pytest's own temp root stays where it was
    private = tempfile.mkdtemp(prefix=f"ptc-tests-{os.getpid()}-")
    os.chmod(private, 0o755)
    previous = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = private, private
    yield
    env, tempfile.tempdir = previous
    if env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = env
    shutil.rmtree(private, ignore_errors=True)


@pytest.fixture(scope="session")
def envsim() -> environments.Harness:
    """The environments harness (test user and venv made once). Where it cannot run, a
    non-root user skips, saying why; root fails (see :func:`skip_unless_root`)."""
    skip_unless_root(environments.unavailable())
    return environments.harness()


def skip_unless_root(reason: str | None) -> None:
    """Nothing when ``reason`` is ``None``; else skip, saying why, as a non-root user, and
    fail as root: tests run as root here (CI does), so a missing ``setpriv``, ``useradd``,
    system Python or cgroup v2 is a broken test machine, never a reason to pass silently."""
    if reason is None:
        return
    if os.geteuid() == 0:
        pytest.fail(f"as root, this machine must be able to run this test: {reason}")
    pytest.skip(reason)


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that share a fixture made once per module (or class, or package) run in one
    pytest-xdist worker (``make test`` runs ``--dist loadgroup``), so it is made once, not
    once per worker: a contained backend, a Ray cluster, a board of a thousand cases."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)  # pytest's record of the item's fixtures
        chains = info.name2fixturedefs.values() if info is not None else ()
        if any(chain[-1].scope in WIDE_SCOPES for chain in chains):  # [-1]: the one in force
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


WIDE_SCOPES = frozenset({"module", "class", "package"})


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("needs_root") is not None:
        reason = full_containment_unavailable()
        if reason is not None:
            pytest.skip(reason)
