"""The reference environments of DESIGN section 7 ("Where hosts run"), simulated per process.

As root on this machine, and without changing anything machine-wide, a host script runs in:

======== ==========================================================================
E1       root on a VM: nothing changed
E2       the test user (non-root), user namespaces allowed, cgroups not writable
E3       E2 plus a seccomp filter refusing ``CLONE_NEWUSER`` (``clone3``: ENOSYS)
E4       Docker's default profile: root, Docker's 14 capabilities, Docker's seccomp refusals
         (namespaces, mount, setns, keyctl, bpf, ...), ``no_new_privs``, read-only cgroups
E4-old   E4 whose profile also refuses the Landlock system calls (Docker before 23)
E4d      E4 with every capability dropped (Kubernetes ``drop: [ALL]`` as root)
E6       a restricted pod: the test user's uid (1001) without groups or capabilities,
         E4's seccomp, ``no_new_privs``, read-only cgroups
======== ==========================================================================

``WITH_PTC_PROFILE`` (``E4+ptc``, ``E4d+ptc``, ``E6+ptc``) are the containers again with the
seccomp rule ``docs/deployment.md`` recommends (read from that file), to test the guide.

The host and everything it starts (zygote, keepers, children) inherit the environment, like
a container's processes. The host runs with the interpreter of a venv made from the system
Python with this worktree's project installed from a wheel (the same venv in every
environment, cached across runs; see ``_venv``).

Usage (the ``envsim`` fixture of ``tests/conftest.py`` builds the harness once per session
and skips, saying why, where it cannot run: not root, no system Python, no cgroup v2)::

    from tests.environments import ENVIRONMENTS, Harness, tcp_listener

    @pytest.mark.slow
    @pytest.mark.parametrize("env", ENVIRONMENTS)
    def test_x(envsim: Harness, env: str) -> None:
        run = envsim.run_code(env, "return 1", containment=Containment(require=frozenset()))
        assert run.results[0]["value"]["result"] == 1
        assert run.survivors == () and run.leftovers == ()

- ``Harness.run_code(env, programs, *, containment=None, limits=None, profile="python",
  timeout_s=90, **run) -> HostRun``: each program through ``run_code`` in one code-mode
  ``ToolRuntime``; ``HostRun.results[i]`` is a ``ToolResult`` as JSON (``is_error``,
  ``error``, ``value``, ``meta``), ``HostRun.output["probe"]`` what ``probe()`` predicted.
- ``Harness.run(env, script, *, inputs=None, files=None, timeout_s=60, settle_s=2,
  delegate_cgroup=False, check=True) -> HostRun``: any host script. It reads ``sys.argv[1]``
  (a JSON file of ``inputs``) and prints a JSON object as its last line (``HostRun.output``);
  ``files`` are written beside it, in its working directory (a canary: readable by the host,
  outside every program's allowed paths).
- ``HostRun``: ``output``, ``stdout``, ``stderr``, ``returncode``, ``survivors`` (processes of
  the run still alive after the host exited; killed since), ``leftovers`` (files in the host's
  ``TMPDIR``, cgroups left under the run's own).
- ``tcp_listener()``: a loopback listener outside the environments; pass ``.port`` in
  ``inputs``, assert ``.accepted() == 0``.
- ``BY_NAME[env]``: how each environment is built (identity, capabilities, seccomp profile,
  ``no_new_privs``, read-only cgroups); ``Harness.user``: the test user (uid 1001).
"""

from __future__ import annotations

from tests.environments._envs import BY_NAME as BY_NAME
from tests.environments._envs import DOCKER_CAPABILITIES as DOCKER_CAPABILITIES
from tests.environments._envs import ENVIRONMENTS as ENVIRONMENTS
from tests.environments._envs import WITH_PTC_PROFILE as WITH_PTC_PROFILE
from tests.environments._envs import Environment as Environment
from tests.environments._harness import Harness as Harness
from tests.environments._harness import HostError as HostError
from tests.environments._harness import HostRun as HostRun
from tests.environments._harness import Listener as Listener
from tests.environments._harness import harness as harness
from tests.environments._harness import tcp_listener as tcp_listener
from tests.environments._harness import unavailable as unavailable
