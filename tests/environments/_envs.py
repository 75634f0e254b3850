"""The reference environments of DESIGN section 7 ("Where hosts run"), as data.

Each :class:`Environment` says how the wrapper (``_wrap``) shapes a host process: which uid it
runs as, which capabilities it keeps, which seccomp profile is loaded before ``exec``, whether
``no_new_privs`` is set and whether ``/sys/fs/cgroup`` is read-only. What the kernel then really
allows in each is asserted by ``test_environments.py`` against
``shared/reference/environments.md``, not derived from this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Identity = Literal["root", "user", "pod"]
"""``root``: uid 0. ``user``: the test user with its groups (a laptop login). ``pod``: the test
user's uid and gid with no supplementary groups (Kubernetes ``runAsUser``)."""
Profile = Literal["none", "no-userns", "docker", "docker-old", "docker-ptc"]
"""The seccomp filter loaded before ``exec``: ``no-userns`` refuses only ``CLONE_NEWUSER``;
``docker`` is what Docker's and containerd's default profiles refuse to a container without
CAP_SYS_ADMIN; ``docker-old`` also refuses Landlock, as profiles before Docker 23 did;
``docker-ptc`` is ``docker`` with the rule ``docs/deployment.md`` adds (read from there, so
the documented rule is the one tested)."""

DOCKER_CAPABILITIES: tuple[str, ...] = (
    "chown",
    "dac_override",
    "fowner",
    "fsetid",
    "kill",
    "setgid",
    "setuid",
    "setpcap",
    "net_bind_service",
    "net_raw",
    "sys_chroot",
    "mknod",
    "audit_write",
    "setfcap",
)
"""The capabilities Docker grants a container by default (moby's ``DefaultCapabilities``)."""


@dataclass(frozen=True)
class Environment:
    """How one reference environment is simulated for a host process and its descendants."""

    name: str
    stands_for: str
    identity: Identity
    capabilities: tuple[str, ...] | None
    """Exactly these (effective, permitted and bounding; none inheritable or ambient), or
    ``None`` for what the identity has anyway (all for root, none for a user)."""
    seccomp: Profile
    no_new_privs: bool
    cgroups_read_only: bool


_ENVIRONMENTS = (
    Environment("E1", "root on a VM (this machine, CI)", "root", None, "none", False, False),
    Environment(
        "E2", "non-root laptop, user namespaces allowed", "user", None, "none", False, False
    ),
    Environment(
        "E3",
        "non-root laptop, user namespaces refused (Ubuntu 24.04, hardened hosts)",
        "user",
        None,
        "no-userns",
        False,
        False,
    ),
    Environment(
        "E4",
        "Docker, default profile, root in the container",
        "root",
        DOCKER_CAPABILITIES,
        "docker",
        True,
        True,
    ),
    Environment(
        "E4-old",
        "Docker before 23: the default profile also refuses Landlock",
        "root",
        DOCKER_CAPABILITIES,
        "docker-old",
        True,
        True,
    ),
    Environment(
        "E4d",
        "root with every capability dropped (Kubernetes drop: [ALL], docker --cap-drop ALL)",
        "root",
        (),
        "docker",
        True,
        True,
    ),
    Environment(
        "E6",
        "restricted Kubernetes pod (runAsNonRoot, drop: [ALL], RuntimeDefault seccomp)",
        "pod",
        (),
        "docker",
        True,
        True,
    ),
)

_WITH_PTC_PROFILE = (
    Environment(
        "E4+ptc",
        "E4 with ptc's seccomp rule (docs/deployment.md)",
        "root",
        DOCKER_CAPABILITIES,
        "docker-ptc",
        True,
        True,
    ),
    Environment(
        "E4d+ptc",
        "E4d with ptc's seccomp rule (docs/deployment.md)",
        "root",
        (),
        "docker-ptc",
        True,
        True,
    ),
    Environment(
        "E6+ptc",
        "E6 with ptc's seccomp rule as a Localhost profile (docs/deployment.md)",
        "pod",
        (),
        "docker-ptc",
        True,
        True,
    ),
)

ENVIRONMENTS: tuple[str, ...] = tuple(e.name for e in _ENVIRONMENTS)
"""Every environment's name, in order: parametrize containment tests over it."""
WITH_PTC_PROFILE: tuple[str, ...] = tuple(e.name for e in _WITH_PTC_PROFILE)
"""The containers again, with the seccomp rule ``docs/deployment.md`` gives to lift them to
E1's level (not reference environments: the settings a deployment guide recommends)."""
BY_NAME: dict[str, Environment] = {e.name: e for e in (*_ENVIRONMENTS, *_WITH_PTC_PROFILE)}
