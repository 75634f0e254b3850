"""Nothing outlives its supervisor (issue 27, item 5): a child whose supervisor (the zygote)
dies dies with it, in every reference environment, and a child cannot reach its supervisor
to make that happen (the per-child seccomp filter: ``tests/security/test_environments.py``,
"name other processes"). The red team set a keeper's RLIMIT_CPU, had it killed, then killed
the host: the child went on sending datagrams every second, held by no one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.environments import ENVIRONMENTS, Harness

pytestmark = pytest.mark.slow

HOST = Path(__file__).with_name("_supervisor_host.py").read_text()


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_a_child_dies_with_its_supervisor(envsim: Harness, env: str) -> None:
    run = envsim.run(env, HOST, timeout_s=90.0)
    assert run.output is not None, (env, run.stderr[-2000:])
    assert run.output["followed"] and run.output["next_run"] == [True, 1], (env, run.output)
    assert run.survivors == () and run.leftovers == (), (run.survivors, run.leftovers)
