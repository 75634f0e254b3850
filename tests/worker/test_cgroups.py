"""Per-run cgroups: v2 controllers where the host's cgroup hands them down, and notes that
say why there is no memory cgroup. This machine's v2 hierarchy has no memory controller
(it is bound to v1), so the v2 files are exercised on a directory laid out like one."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from worker._host import _cgroups
from worker._host._cgroups import RunCgroups
from worker._kernel._syscalls import write_file


def _layout(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_a_v2_cgroup_with_the_memory_controller_takes_the_limit(tmp_path: Path) -> None:
    run = _layout(
        tmp_path / "run",
        {
            "memory.max": "max\n",
            "memory.swap.max": "max\n",
            "memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
            "memory.peak": str(300 << 20),
        },
    )
    cgroups = RunCgroups(unified=str(run), v2_controllers=("memory", "pids"))
    assert cgroups.has_memory
    assert cgroups.set_memory_limit(256 << 20)
    assert (run / "memory.max").read_text() == str(256 << 20)
    assert (run / "memory.swap.max").read_text() == "0"  # swap cannot stretch the limit
    assert not cgroups.oom_killed()
    (run / "memory.events").write_text("oom 2\noom_kill 2\n")
    assert cgroups.oom_killed()
    assert cgroups.peak_memory_kib() == 300 << 10


def test_without_a_memory_controller_nothing_is_measured_or_limited(tmp_path: Path) -> None:
    cgroups = RunCgroups(unified=str(_layout(tmp_path / "run", {})), v2_controllers=("pids",))
    assert not cgroups.has_memory
    assert not cgroups.set_memory_limit(1 << 30)
    assert cgroups.peak_memory_kib() is None and cgroups.oom_kills() == 0


def test_the_host_cgroup_hands_its_controllers_down(tmp_path: Path) -> None:
    base = _layout(
        tmp_path / "host",
        {"cgroup.controllers": "cpu io memory pids\n", "cgroup.subtree_control": ""},
    )
    assert _cgroups._hand_down(str(base)) == ""
    assert (base / "cgroup.subtree_control").read_text() == "+memory +pids"


def test_a_host_cgroup_without_the_controllers_says_so(tmp_path: Path) -> None:
    base = _layout(tmp_path / "host", {"cgroup.controllers": "hugetlb\n"})
    assert "no memory or pids controller" in _cgroups._hand_down(str(base))


@pytest.mark.parametrize(
    ("err", "words"),
    [
        (errno.EROFS, "read-only (a container's default)"),
        (errno.EACCES, "not writable by uid"),
        (errno.EPERM, "Delegate=yes"),
    ],
)
def test_a_refused_cgroup_says_what_the_host_can_do(err: int, words: str) -> None:
    assert words in _cgroups._why(OSError(err, os.strerror(err)), "/sys/fs/cgroup/x")


@pytest.mark.needs_root
def test_here_runs_get_v1_memory_and_a_v2_cgroup_for_cgroup_kill() -> None:
    cgroups = RunCgroups.create(f"ptc-test-{os.getpid()}")
    try:
        assert cgroups.memory is not None and cgroups.pids is not None
        assert cgroups.unified is not None and cgroups.has_memory and cgroups.note == ""
        assert cgroups.peak_memory_kib() == 0  # nothing ran in it yet
    finally:
        cgroups.remove()


def test_the_janitor_removes_every_discarded_cgroup_while_closes_race_discards(
    tmp_path: Path,
) -> None:
    """The pool closes its janitor on a worker thread while chores on the event loop may
    still discard: no close may join a thread that has not started, and no cgroup
    discarded around a close may be left behind (it was, queued behind the old thread's
    end)."""
    import threading

    janitor = _cgroups.CgroupJanitor()
    dirs = [tmp_path / f"run-{i}" for i in range(400)]
    for path in dirs:
        path.mkdir()
    errors: list[BaseException] = []
    discarding = threading.Event()

    def discard_all() -> None:
        discarding.set()
        try:
            for path in dirs:
                janitor.discard(RunCgroups(unified=str(path)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def close_often() -> None:
        discarding.wait()
        try:
            for _ in range(200):
                janitor.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=discard_all), threading.Thread(target=close_often)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    janitor.close()
    assert errors == []
    assert [path for path in dirs if path.exists()] == []
    assert not [t for t in threading.enumerate() if t.name == "ptc-cgroup-janitor"]


@pytest.mark.needs_root
def test_emptied_cgroups_serve_a_later_run_and_occupied_ones_never_do() -> None:
    import signal
    import subprocess
    import sys

    janitor = _cgroups.CgroupJanitor()
    first = janitor.take(f"ptc-test-{os.getpid()}-kept")
    try:
        assert first.memory is not None and first.unified is not None, first.note
        assert first.set_memory_limit(64 << 20)
        # A process that filled the cgroup, gone now: its peak stays until the reset.
        proc = subprocess.Popen([sys.executable, "-c", "x = bytearray(30 << 20)"])
        write_file(os.path.join(first.unified, "cgroup.procs"), str(proc.pid))
        write_file(os.path.join(first.memory, "cgroup.procs"), str(proc.pid))
        proc.wait()
        janitor.recycle(first)
        again = janitor.take("never-made")
        assert again is first  # kept, not made again
        peak = again.peak_memory_kib()
        assert peak is not None and peak < 30 << 10  # started again
        # Raised and lowered again, memsw kept above the limit each time.
        assert again.set_memory_limit(512 << 20) and again.set_memory_limit(128 << 20)
        # One with a process still in it is never kept for another run.
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        assert again.unified is not None
        write_file(os.path.join(again.unified, "cgroup.procs"), str(sleeper.pid))
        janitor.recycle(again)
        fresh = janitor.take(f"ptc-test-{os.getpid()}-fresh")
        fresh.remove()
        assert fresh is not again
        sleeper.send_signal(signal.SIGKILL)
        sleeper.wait()
    finally:
        janitor.close()
    assert not os.path.exists(first.unified or "")


def test_a_host_out_of_file_descriptors_is_not_a_limit_the_cgroup_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cgroups = RunCgroups(unified=str(_layout(tmp_path / "run", {"memory.max": "max\n"})),
                         v2_controllers=("memory",))  # fmt: skip
    failure = {"errno": errno.EMFILE}

    def write(path: str, text: str) -> None:
        raise OSError(failure["errno"], os.strerror(failure["errno"]))

    monkeypatch.setattr(_cgroups, "_write", write)
    with pytest.raises(OSError) as info:  # the caller says what it is (worker-exit)
        cgroups.set_memory_limit(1 << 30)
    assert info.value.errno == errno.EMFILE
    failure["errno"] = errno.EACCES  # the cgroup itself refused: a limit not set
    assert not cgroups.set_memory_limit(1 << 30)
