"""The keeper's scratch quota, where no tmpfs can be mounted (no mount namespace).

The child writes to a plain directory on the host's disk. The keeper watches it with
inotify (every subdirectory too) and keeps the total of what the child's files take; the
child's own RLIMIT_FSIZE keeps any one file within the quota from the start. Once the total
passes ``Limits.scratch_mib``, the keeper lowers the child's RLIMIT_FSIZE (soft and hard,
so it cannot be raised again) to 0: every write that would make a file longer fails with
EFBIG, an ``OSError`` in the program, as ENOSPC is on a full tmpfs. Past the entry cap (as
many names as the tmpfs has inodes) the keeper kills the child, since creating empty files
or directories needs no bytes.

What a file takes is ``max(size, allocated blocks)``. Files the child unlinked while it
still has them open (or mapped), and ``O_TMPFILE`` files that never had a name, still take
space and can still grow: inotify reports their writes under an old name (or ``#inode``),
so on every batch of events the keeper also reads the child's open files from
``/proc/<child>/fd`` (and ``/proc/<child>/maps`` for what is only mapped).

How strict: the kernel refuses nothing by itself until the keeper acts, so a burst of
writes that lands between one event and the keeper's reaction passes the quota by what it
wrote meanwhile (measured: docs/security.md). After that, files cannot grow at all for the
rest of the run, even after deletions (the hard limit cannot be raised without
CAP_SYS_RESOURCE). Standard library only: the keeper runs it in the zygote's fork.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import stat
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_IN_MODIFY = 0x00000002
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_IN_EXCL_UNLINK = 0x04000000
_IN_ISDIR = 0x40000000
_WATCHED = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
_EVENT = struct.Struct("iIII")
MAX_ENTRIES = 65536
"""Names (files, directories, links) the scratch dir may hold: the scratch tmpfs's inodes."""


def _taken(st: os.stat_result) -> int:
    """Bytes a file takes: its length (a sparse file counts whole: it can be filled without
    a size change) or its allocated blocks, whichever is larger."""
    if stat.S_ISREG(st.st_mode):
        return max(st.st_size, int(st.st_blocks) * 512)
    return int(st.st_blocks) * 512


def _writable(fdinfo: str) -> bool:
    """Whether the fd whose ``/proc/<pid>/fdinfo`` entry this is was opened for writing."""
    with open(fdinfo, encoding="ascii") as fh:
        for line in fh:
            if line.startswith("flags:"):
                return int(line.split()[1], 8) & os.O_ACCMODE != os.O_RDONLY
    return False


class ScratchQuota:
    """Watches one scratch dir for one child; :meth:`check` after its fd is readable.

    Raises ``OSError`` when inotify cannot be set up (e.g. the user's inotify instances
    are used up); the keeper then reports the quota as not applied.
    """

    def __init__(
        self, path: str, child_pid: int, limit_bytes: int, *, refuse_growth: bool = True
    ) -> None:
        self._root = path
        self._child = child_pid
        self._limit = limit_bytes
        self._refuse_growth = refuse_growth
        self._dev = os.stat(path).st_dev
        fd: int = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self._fd = fd
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory
        self._folders: set[str] = set()  # every directory path under the root
        self._names: dict[str, int] = {}  # path -> inode, every name under the root
        self._links: dict[int, int] = {}  # inode -> how many of those names it has
        self._taken: dict[int, int] = {}  # inode -> bytes, for inodes named or still held
        self._unnamed: set[int] = set()  # inodes without a name, kept while held open
        self.refused = False
        """Whether the keeper has refused further growth (RLIMIT_FSIZE 0)."""
        self.total = 0
        try:
            self._watch_tree(path)
            self._recount()
        except BaseException:
            self.close()
            raise

    def fileno(self) -> int:
        return self._fd

    @property
    def limit(self) -> int:
        """The quota, bytes."""
        return self._limit

    @property
    def dev(self) -> int:
        """The device of the scratch dir's filesystem (files elsewhere do not count)."""
        return self._dev

    @property
    def entries(self) -> int:
        return len(self._names)

    def check(self, *, recount: bool = True) -> str:
        """Read the pending events and recount; refuse growth once over the quota. Returns
        why the child must be killed ("" while it need not). ``recount=False``: follow the
        names only (the write gate recounts when it decides)."""
        for wd, mask, name in self._events():
            if mask & _IN_Q_OVERFLOW:
                self._rescan()
                continue
            folder = self._dirs.get(wd)
            if folder is None or mask & _IN_IGNORED:
                self._dirs.pop(wd, None)
                continue
            if name:
                self._event(os.path.join(folder, name), mask)
        if recount:
            self._recount()
        if self._refuse_growth and self.total > self._limit and not self.refused:
            self.refused = True
            resource.prlimit(self._child, resource.RLIMIT_FSIZE, (0, 0))
        if len(self._names) > MAX_ENTRIES:
            return (
                f"the scratch dir holds more than {MAX_ENTRIES} files and directories "
                "(the keeper's scratch quota)"
            )
        return ""

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # --- accounting -------------------------------------------------------------------

    def _event(self, path: str, mask: int) -> None:
        if mask & (_IN_DELETE | _IN_MOVED_FROM):
            self._forget(path)
            return
        try:
            st = os.lstat(path)
        except OSError:  # gone again, or an unlinked/O_TMPFILE file: the fd scan sees it
            self._forget(path)
            return
        self._name(path, st)
        if stat.S_ISDIR(st.st_mode) and mask & (_IN_CREATE | _IN_MOVED_TO):
            self._watch_tree(path)

    def _name(self, path: str, st: os.stat_result) -> None:
        """``path`` names inode ``st.st_ino`` now."""
        old = self._names.get(path)
        if old != st.st_ino:
            if old is not None:
                self._forget(path)
            self._names[path] = st.st_ino
            self._links[st.st_ino] = self._links.get(st.st_ino, 0) + 1
            self._unnamed.discard(st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                self._folders.add(path)
        self._set_taken(st.st_ino, _taken(st))

    def _set_taken(self, ino: int, taken: int) -> None:
        self.total += taken - self._taken.get(ino, 0)
        self._taken[ino] = taken

    def _forget(self, path: str) -> None:
        """``path`` no longer names its inode (a directory: nor anything beneath it)."""
        doomed = [path]
        if path in self._folders:
            prefix = path + os.sep
            doomed += [n for n in self._names if n.startswith(prefix)]
        for name in doomed:
            self._folders.discard(name)
            ino = self._names.pop(name, None)
            if ino is None:
                continue
            self._links[ino] -= 1
            if not self._links[ino]:
                del self._links[ino]
                self._unnamed.add(ino)  # freed once nothing holds it (_recount)

    def _watch_tree(self, top: str) -> None:
        """Watch ``top`` and every directory below, then record what is already there
        (watch first: nothing created meanwhile is missed)."""
        stack = [top]
        while stack:
            folder = stack.pop()
            wd = _libc.inotify_add_watch(
                self._fd, os.fsencode(folder), _WATCHED | _IN_ONLYDIR | _IN_DONT_FOLLOW
            )
            if wd < 0:
                err = ctypes.get_errno()
                if err in (errno.ENOENT, errno.ENOTDIR):
                    continue  # removed or replaced before we got to it
                raise OSError(err, f"inotify_add_watch: {os.strerror(err)}")
            self._dirs[wd] = folder
            with contextlib.suppress(OSError), os.scandir(folder) as it:
                for entry in it:
                    with contextlib.suppress(OSError):
                        st = entry.stat(follow_symlinks=False)
                        self._name(entry.path, st)
                        if stat.S_ISDIR(st.st_mode):
                            stack.append(entry.path)

    def _rescan(self) -> None:
        """The event queue overflowed: start over from the tree itself (what is held open
        without a name is found again by the next recount)."""
        for wd in list(self._dirs):
            _libc.inotify_rm_watch(self._fd, wd)
        for table in (self._dirs, self._names, self._links, self._taken):
            table.clear()
        self._folders.clear()
        self._unnamed.clear()
        self.total = 0
        self._watch_tree(self._root)

    def _recount(self) -> None:
        """Refresh what the child's open files take, and free the unnamed inodes nothing
        holds any more (neither an open file nor a mapping of the child)."""
        held: set[int] = set()
        for ino, taken in self._open_files().items():
            held.add(ino)
            if ino not in self._links:
                self._unnamed.add(ino)
            self._set_taken(ino, taken)
        loose = self._unnamed - held
        if loose:
            loose -= self._mapped()
        for ino in loose:
            self._unnamed.discard(ino)
            self.total -= self._taken.pop(ino, 0)

    def _open_files(self) -> dict[int, int]:
        """Inode -> bytes taken, for the child's open files of the scratch dir: those it
        named once, and those open for writing (where it may write is the scratch dir: a
        file it only reads may be any file of the same filesystem, the interpreter's)."""
        found: dict[int, int] = {}
        base = f"/proc/{self._child}/fd"
        try:
            fds = os.listdir(base)
        except OSError:
            return found
        for fd in fds:
            with contextlib.suppress(OSError, ValueError, KeyError):
                st = os.stat(f"{base}/{fd}")
                if st.st_dev != self._dev or not stat.S_ISREG(st.st_mode):
                    continue
                if st.st_ino in self._taken or _writable(f"/proc/{self._child}/fdinfo/{fd}"):
                    found[st.st_ino] = _taken(st)
        return found

    def _mapped(self) -> set[int]:
        """Inodes of the scratch fs the child has mapped (a mapping keeps a file alive)."""
        dev = f"{os.major(self._dev):02x}:{os.minor(self._dev):02x}"
        found: set[int] = set()
        maps = f"/proc/{self._child}/maps"
        with contextlib.suppress(OSError), open(maps, encoding="ascii", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) >= 5 and parts[3] == dev:
                    with contextlib.suppress(ValueError):
                        found.add(int(parts[4]))
        return found

    def _events(self) -> list[tuple[int, int, str]]:
        events: list[tuple[int, int, str]] = []
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return events
            at = 0
            while at < len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, at)
                raw = data[at + _EVENT.size : at + _EVENT.size + length]
                events.append((wd, mask, os.fsdecode(raw.rstrip(b"\0"))))
                at += _EVENT.size + length
