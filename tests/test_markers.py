"""``needs_root`` skips only where full containment is truly unavailable, and says why; the
environment simulation skips only for a non-root user (as root a missing tool fails); the
hypothesis profile ``make test`` runs draws the same examples every run."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from tests import environments
from tests.conftest import full_containment_unavailable, skip_unless_root


def test_a_non_root_host_is_told_why_containment_tests_skip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = full_containment_unavailable.__wrapped__()
    assert reason is not None and "needs root (running as uid 1000)" in reason


@pytest.mark.skipif(os.geteuid() != 0, reason="only meaningful where tests run as root")
def test_as_root_on_this_kind_of_machine_nothing_is_skipped() -> None:
    # CI runs as root here: a containment gap must fail the run, not skip it silently.
    assert full_containment_unavailable() is None


def test_a_missing_tool_skips_a_non_root_user_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception, match="needs setpriv on PATH"):
        skip_unless_root("needs setpriv on PATH")
    skip_unless_root(None)


def test_a_missing_tool_fails_root_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(pytest.fail.Exception, match="as root, .*: needs useradd on PATH"):
        skip_unless_root("needs useradd on PATH")
    skip_unless_root(None)


@pytest.mark.skipif(os.geteuid() != 0, reason="only meaningful where tests run as root")
def test_as_root_the_environments_can_be_simulated() -> None:
    assert environments.unavailable() is None


@pytest.mark.skipif(
    os.environ.get("PTC_HYPOTHESIS_PROFILE") != "ci", reason="make test (and CI) sets it"
)
def test_make_test_draws_the_same_examples_on_every_run() -> None:
    active = settings()
    assert active.derandomize and active.database is None and active.deadline is None
    assert active.max_examples == 100  # where a test does not set its own


def test_tests_sharing_a_module_fixture_are_one_xdist_group(request: pytest.FixtureRequest) -> None:
    # tests/worker/test_fidelity.py builds its boards once per module (a module fixture).
    sharing = [i for i in request.session.items if "test_fidelity.py::" in i.nodeid]
    if not sharing:
        pytest.skip("tests/worker/test_fidelity.py is not collected in this run")
    groups = {m.args[0] for i in sharing if (m := i.get_closest_marker("xdist_group"))}
    assert groups == {"tests/worker/test_fidelity.py"}
