"""The harness itself: each environment is what ``shared/reference/environments.md`` says it
is, a process cannot leave it, and cleanup ends what a run started and nothing else.

The expected rows are written out here, from the reference table, not derived from the
environments' definitions: a wrapper that forgot a step fails its row.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.environments import (
    DOCKER_CAPABILITIES,
    ENVIRONMENTS,
    Harness,
    HostError,
    _probe,
    tcp_listener,
)

PROBE = Path(_probe.__file__).read_text()
CONTAINERS = ("E4", "E4-old", "E4d", "E6")
"""The environments whose seccomp profile, ``no_new_privs`` and read-only cgroups come from a
container runtime."""


@functools.cache
def own() -> dict[str, Any]:
    """This (root) test process's own row: what "all" means on this machine."""
    return _probe.probe()


def expected_row(env: str, test_uid: int) -> dict[str, Any]:
    """The row of the reference table, in the probe's terms."""
    root = env in ("E1", "E4", "E4-old", "E4d")
    mine = {k: sorted(v) for k, v in own()["capabilities"].items()}
    capabilities = {
        "E1": {k: mine[k] for k in ("effective", "permitted", "bounding")},
        # A laptop user: no capabilities, the machine's bounding set.
        "E2": {"effective": [], "permitted": [], "bounding": mine["bounding"]},
        "E3": {"effective": [], "permitted": [], "bounding": mine["bounding"]},
        "E4": dict.fromkeys(("effective", "permitted", "bounding"), sorted(DOCKER_CAPABILITIES)),
        "E4-old": dict.fromkeys(
            ("effective", "permitted", "bounding"), sorted(DOCKER_CAPABILITIES)
        ),
        "E4d": dict.fromkeys(("effective", "permitted", "bounding"), []),
        "E6": dict.fromkeys(("effective", "permitted", "bounding"), []),
    }[env]
    return {
        "uids": [0] * 4 if root else [test_uid] * 4,
        "capabilities": {**capabilities, "inheritable": [], "ambient": []},
        "unshare_user": "ok" if env in ("E1", "E2") else "EPERM",
        # Without a user namespace, a mount namespace needs CAP_SYS_ADMIN.
        "unshare_mount": "ok" if env == "E1" else "EPERM",
        # The kernel answers EINVAL to a NULL clone3; a filter answers ENOSYS.
        "clone3": "EINVAL" if env in ("E1", "E2") else "ENOSYS",
        "cgroup_mkdir": {"E1": "ok", "E2": "EACCES", "E3": "EACCES"}.get(env, "EROFS"),
        "cgroup_mounts": "ro" if env in CONTAINERS else "rw",
        "no_new_privs": 1 if env in CONTAINERS else 0,
        "seccomp": 0 if env in ("E1", "E2") else 2,
        "landlock_abi": "EPERM" if env == "E4-old" else own()["landlock_abi"],
    }


def observed_row(row: dict[str, Any]) -> dict[str, Any]:
    caps = row["capabilities"]
    mounts = set(row["cgroup_mounts"].values())
    return {
        "uids": row["uids"],
        "capabilities": {k: sorted(v) for k, v in caps.items()},
        "unshare_user": row["unshare_user"],
        "unshare_mount": row["unshare_mount"],
        "clone3": row["clone3"],
        "cgroup_mkdir": row["cgroup_mkdir"],
        "cgroup_mounts": mounts.pop() if len(mounts) == 1 else sorted(mounts),
        "no_new_privs": row["no_new_privs"],
        "seccomp": row["seccomp"],
        "landlock_abi": row["landlock_abi"],
    }


def test_this_machine_can_tell_the_environments_apart() -> None:
    # Root with (nearly) every capability and Landlock: otherwise the rows below say less.
    mine = own()
    if os.geteuid() != 0:
        pytest.skip("the environments are simulated as root")
    assert set(DOCKER_CAPABILITIES) < set(mine["capabilities"]["effective"])
    assert isinstance(mine["landlock_abi"], int) and mine["landlock_abi"] >= 1
    assert mine["cgroup_mounts"], "no cgroup mounts to make read-only"


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_each_environment_allows_what_the_reference_table_says(envsim: Harness, env: str) -> None:
    row = envsim.run(env, PROBE).output
    assert row is not None
    assert observed_row(row) == expected_row(env, envsim.user.uid)


def test_the_pod_runs_as_uid_1001_without_groups_and_a_laptop_user_with_its_own(
    envsim: Harness,
) -> None:
    pod, laptop = (envsim.run(env, PROBE).output for env in ("E6", "E2"))
    assert pod is not None and laptop is not None
    assert envsim.user.uid == 1001, "uid 1001 was taken on this machine: E6 runs as another"
    assert pod["gids"] == [envsim.user.gid] * 4 and pod["groups"] == []
    assert laptop["groups"] == [envsim.user.gid]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_descendants_in_new_sessions_stay_in_the_environment(envsim: Harness, env: str) -> None:
    # Two levels down, each a new session started by exec: same filter, caps, mounts, uid.
    row = envsim.run(env, PROBE, inputs={"descend": 2}).output
    assert row is not None
    deepest = row["child"]["child"]
    assert deepest["session"] != row["session"]
    assert observed_row(deepest) == observed_row(row) == expected_row(env, envsim.user.uid)


UNDO = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
MS_REMOUNT, MS_BIND = 0x20, 0x1000
PR_SET_NO_NEW_PRIVS = 38
out = {}
for point in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
    ok = libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND, None) == 0
    out[point] = "remounted" if ok else os.strerror(ctypes.get_errno())
ok = libc.prctl(PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0) == 0
out["clear no_new_privs"] = "cleared" if ok else os.strerror(ctypes.get_errno())
print(json.dumps(out))
"""


@pytest.mark.parametrize("env", CONTAINERS)
def test_a_container_cannot_make_its_cgroups_writable_or_clear_no_new_privs(
    envsim: Harness, env: str
) -> None:
    out = envsim.run(env, UNDO).output
    assert out == {
        "/sys/fs/cgroup": "Operation not permitted",
        "/sys/fs/cgroup/unified": "Operation not permitted",
        "clear no_new_privs": "Invalid argument",
    }


DAEMON = """
import json, os, subprocess, sys
# Double fork and a new session: the way out of a process group and of the host's tree.
read, write = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(write, str(os.getpid()).encode())
        os.execvp("sleep", ["sleep", "300"])
    os._exit(0)
os.wait()
print(json.dumps({"daemon": int(os.read(read, 32))}))
"""


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_cleanup_ends_what_the_run_left_behind_and_nothing_else(envsim: Harness, env: str) -> None:
    # A bystander of the same uid as E2's host, outside the run: cleanup must spare it.
    user = envsim.user
    bystander = subprocess.Popen(
        ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "sleep", "300"],
        start_new_session=True,
    )
    try:
        run = envsim.run(env, DAEMON, settle_s=0.5)
        assert run.output is not None
        daemon = run.output["daemon"]
        assert [s.split()[0] for s in run.survivors] == [str(daemon)]
        assert "sleep 300" in run.survivors[0]
        assert not _alive(daemon)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


PLUMBING = """
import json, os, socket, sys
inputs = json.load(open(sys.argv[1]))
with socket.create_connection(("127.0.0.1", inputs["port"])):
    pass
with open(os.path.join(os.environ["TMPDIR"], "left-here"), "w") as fh:
    fh.write("x")
print("not the last line")
print(json.dumps({"canary": open("canary.txt").read(), "cwd": os.getcwd()}))
"""


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_a_host_reads_its_files_reaches_the_listener_and_its_leftovers_are_seen(
    envsim: Harness, env: str
) -> None:
    with tcp_listener() as listener:
        run = envsim.run(
            env, PLUMBING, inputs={"port": listener.port}, files={"canary.txt": "secret"}
        )
        assert listener.accepted() == 1
    assert run.output is not None and run.output["canary"] == "secret"
    assert Path(run.output["cwd"]).name.startswith(f"ptc-envsim-{env}-")
    assert run.leftovers == ("left-here",)
    assert not Path(run.output["cwd"]).exists()


@pytest.mark.parametrize(("env", "mkdir"), [("E2", "ok"), ("E6", "EROFS")])
def test_a_delegated_cgroup_is_writable_where_cgroups_are_not_read_only(
    envsim: Harness, env: str, mkdir: str
) -> None:
    row = envsim.run(env, PROBE, delegate_cgroup=True).output
    assert row is not None and row["cgroup_mkdir"] == mkdir


def test_a_failing_host_raises_with_its_stderr(envsim: Harness) -> None:
    with pytest.raises(HostError, match=r"(?s)E3: the host exited 3.*stderr:\n.*boom"):
        envsim.run("E3", "import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)")
    with pytest.raises(HostError, match="without a JSON object on stdout"):
        envsim.run("E3", "print('[1, 2]')")
    run = envsim.run("E3", "print('no json')", check=False)
    assert run.returncode == 0 and run.output is None and run.stdout == "no json\n"


def test_a_host_past_its_timeout_is_killed_with_everything_it_started(envsim: Harness) -> None:
    script = (
        "import os, subprocess, sys\n"
        "child = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "print('pids', os.getpid(), child.pid, file=sys.stderr, flush=True)\n"
        "child.wait()\n"
    )
    with pytest.raises(HostError, match="did not finish in 1.0 s") as caught:
        envsim.run("E6", script, timeout_s=1.0)
    line = next(x for x in str(caught.value).splitlines() if x.startswith("pids "))
    pids = [int(p) for p in line.split()[1:]]
    assert pids and not any(_alive(pid) for pid in pids)


def test_a_run_cgroup_left_by_a_dead_harness_is_cleaned_up_by_the_next(envsim: Harness) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = envsim.cgroup_base / f"ptc-envsim-{gone.pid}-0"
    stale.mkdir()
    orphan = subprocess.Popen(["sleep", "300"], start_new_session=True)
    (stale / "cgroup.procs").write_text(str(orphan.pid))
    try:
        Harness(python=envsim.python, user=envsim.user)
        assert orphan.wait(timeout=10) == -9
        assert not stale.exists()
    finally:
        orphan.kill()
        orphan.wait()


@pytest.mark.parametrize("name", ["host.py", "tmp", "../x", ".stdout"])
def test_files_must_be_plain_names_the_harness_leaves_free(envsim: Harness, name: str) -> None:
    with pytest.raises(ValueError, match="not plain names"):
        envsim.run("E1", "print('{}')", files={name: "x"})
