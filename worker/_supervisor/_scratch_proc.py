"""What a child holds, read by its keeper from ``/proc/<child>``: its open files (the mount
each belongs to, whether it writes, where its offset is), the files it has mapped, and a few
bytes of its memory; and which mount the scratch dir is.

Every read either succeeds or raises :class:`Blind`, never guesses: the keeper's scratch
quota refuses what it cannot see (a child that made itself non-dumpable, a keeper out of
file descriptors, a directory the child made unreadable), it never approves it. A file or
process that is gone is not blindness: its fd is closed, so it holds nothing.

"Inside scratch" is decided by the mount a file belongs to (``mnt_id`` in
``/proc/<pid>/fdinfo/<fd>``), not by ``st_dev``: on overlayfs, a file reports the device of
its layer, another one than its directory's. ``/proc/<pid>/maps`` names a mapped file by its
superblock's device (the mount's, in ``/proc/self/mountinfo``) and its inode number.
Standard library only: the keeper runs it in the zygote's fork.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

Key = tuple[int, int]
"""A file: ``(st_dev, st_ino)`` as ``stat`` reports it (through a name or an open fd)."""
_GONE = (errno.ENOENT, errno.ESRCH)
"""The file or the process no longer exists: nothing held, nothing to see."""


class Blind(Exception):
    """The keeper could not read what it needs to keep the quota (the message says what)."""

    @property
    def reason(self) -> str:
        """Why the keeper kills the child, as its exit report says it."""
        return f"its scratch quota could not be kept: {self}"


def taken(st: os.stat_result) -> int:
    """Bytes a file takes: its length (a sparse file counts whole: it can be filled through
    a mapping without a call the gate sees) or its allocated blocks, whichever is larger."""
    blocks = int(st.st_blocks) * 512
    return max(st.st_size, blocks) if stat.S_ISREG(st.st_mode) else blocks


@dataclass(frozen=True)
class OpenFile:
    """One open fd of the child, as the keeper found it."""

    fd: int
    st: os.stat_result
    flags: int
    """``open`` flags (``O_APPEND``, the access mode); 0 for what is not a regular file."""
    pos: int
    """The file offset: where a plain ``write`` lands unless ``O_APPEND``."""
    mnt_id: int
    """The mount it was opened through (-1 for what is not a regular file)."""

    @property
    def key(self) -> Key:
        return (self.st.st_dev, self.st.st_ino)

    @property
    def regular(self) -> bool:
        return stat.S_ISREG(self.st.st_mode)

    @property
    def writable(self) -> bool:
        """Opened for writing (``O_PATH`` and read-only fds cannot make a file longer)."""
        return self.flags & os.O_ACCMODE != os.O_RDONLY and not self.flags & _O_PATH


_O_PATH = 0o10000000


class ScratchMount:
    """The mount the scratch dir belongs to: its id, and its superblock's device as
    ``/proc/<pid>/maps`` prints it. Raises ``OSError`` when it cannot be read."""

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self.mnt_id = int(_fdinfo(f"/proc/self/fdinfo/{fd}")["mnt_id"])
        except (KeyError, ValueError) as exc:
            raise OSError(errno.EIO, f"no mnt_id for {path}") from exc
        finally:
            os.close(fd)
        self.device = _mount_device(self.mnt_id)
        """``(major, minor)`` of the mount's superblock."""
        self.path = os.path.realpath(path)


def _mount_device(mnt_id: int) -> tuple[int, int]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            fields = line.split(" ", 3)
            if fields[0] == str(mnt_id):
                major, minor = fields[2].split(":")
                return int(major), int(minor)
    raise OSError(errno.ENOENT, f"mount {mnt_id} is not in /proc/self/mountinfo")


def _fdinfo(path: str) -> dict[str, str]:
    with open(path, encoding="ascii", errors="replace") as fh:
        return {k: v.strip() for k, _, v in (line.partition(":") for line in fh) if v}


def open_file(pid: int, fd: int) -> OpenFile | None:
    """The child's fd ``fd`` (``None``: not open). Raises :class:`Blind`."""
    try:
        st = os.stat(f"/proc/{pid}/fd/{fd}")
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise Blind(f"cannot stat /proc/{pid}/fd/{fd}: {exc.strerror}") from exc
    if not stat.S_ISREG(st.st_mode):
        return OpenFile(fd=fd, st=st, flags=0, pos=0, mnt_id=-1)
    try:
        info = _fdinfo(f"/proc/{pid}/fdinfo/{fd}")
        return OpenFile(
            fd=fd,
            st=st,
            flags=int(info["flags"], 8),
            pos=int(info["pos"]),
            mnt_id=int(info["mnt_id"]),
        )
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise Blind(f"cannot read /proc/{pid}/fdinfo/{fd}: {exc.strerror}") from exc
    except (KeyError, ValueError) as exc:
        raise Blind(f"/proc/{pid}/fdinfo/{fd} lacks flags, pos or mnt_id") from exc


def open_files(pid: int) -> list[OpenFile]:
    """Every regular file the child has open. Raises :class:`Blind`."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError as exc:
        if exc.errno in _GONE:
            return []
        raise Blind(f"cannot list /proc/{pid}/fd: {exc.strerror}") from exc
    found = []
    for name in fds:
        entry = open_file(pid, int(name))
        if entry is not None and entry.regular:
            found.append(entry)
    return found


def mapped(pid: int, mount: ScratchMount) -> dict[int, bool]:
    """Inode -> whether its mapping's path lies in the scratch dir, for every file of the
    scratch mount's filesystem the child has mapped (a mapping keeps a file alive, and a
    shared one writes it). Raises :class:`Blind`."""
    found: dict[int, bool] = {}
    inside = mount.path.rstrip("/") + "/"
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines()
    except OSError as exc:
        if exc.errno in _GONE:
            return found
        raise Blind(f"cannot read /proc/{pid}/maps: {exc.strerror}") from exc
    for line in lines:
        # start-end perms offset major:minor inode [path]
        parts = line.split(None, 5)
        if len(parts) < 5 or parts[4] == "0":
            continue
        major, _, minor = parts[3].partition(":")
        try:
            if (int(major, 16), int(minor, 16)) != mount.device:
                continue
            ino = int(parts[4])
        except ValueError as exc:
            raise Blind(f"/proc/{pid}/maps has a line it cannot parse: {line!r}") from exc
        path = parts[5].rstrip("\n") if len(parts) > 5 else ""
        found[ino] = found.get(ino, False) or path.startswith(inside)
    return found


def read_memory(pid: int, address: int, size: int) -> bytes | None:
    """``size`` bytes at ``address`` in the waiting child's memory; ``None`` when that
    address is not readable (the call that names it fails with EFAULT). Raises
    :class:`Blind` when the child's memory cannot be opened at all."""
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise Blind(f"cannot open /proc/{pid}/mem: {exc.strerror}") from exc
    try:
        data = os.pread(fd, size, address)
    except (OSError, OverflowError):
        return None
    finally:
        os.close(fd)
    return data if len(data) == size else None
