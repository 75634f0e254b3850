"""What a child is forked with, as typed mappings: plain JSON-able dicts (they cross from the
host to the zygote as JSON, and the zygote merges them without building objects between two
forks), whose every key a type checker knows.

- :class:`ZygoteConfig` — the containment a zygote gives every child (the host's
  ``Containment``) and the backend's scratch root; the zygote's argv.
- :class:`ChildRequest` — one child's own: its scratch dir, size and cgroups; a request on the
  zygote's control socket.
- :class:`DomainFacts` — what the zygote set up once for all of them (``_domain``).
- :class:`Shared` — the first and the third, and what the zygote asked once, for every child.
- :class:`ChildConfig` — all of it together, plus what the zygote decides per fork: what the
  child reads (``_isolate``, ``_confine``).
"""

from __future__ import annotations

from typing import TypedDict


class ZygoteConfig(TypedDict):
    root: str
    landlock_abi_limit: int | None
    scratch_gate: bool
    namespaces: bool
    rlimits: bool
    landlock: bool
    seccomp: bool
    drop_privileges: bool


class ChildRequest(TypedDict):
    scratch: str
    cgroups: list[list[str]]
    cgroup_v2_controllers: list[str]
    cgroup_note: str
    scratch_mib: int


class DomainFacts(TypedDict):
    zygote_namespaces: list[str]
    namespace_error: str
    tmpfs: bool
    tmpfs_error: str
    ruleset_fd: int
    landlock_abi: int
    landlock_error: str
    read_only: list[str]
    zygote_pid: int
    zygote_pidfd: int


class Shared(ZygoteConfig, DomainFacts):
    uid_drop_obstacle: str
    zygote_uid_dropped: bool


class ChildConfig(Shared, ChildRequest):
    pidns: bool
