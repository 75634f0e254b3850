"""The keeper's scratch quota, where no tmpfs can be mounted (no mount namespace).

The child writes to a plain directory on the host's disk. The keeper watches it with
inotify (every subdirectory too) and keeps the total of what the child's files take; the
child's own RLIMIT_FSIZE keeps any one file within the quota from the start. With the write
gate (``_scratch_gate``) every call that could make that total grow waits for the keeper,
which charges it here first: the total is then an upper bound at every moment. Without the
gate, once the total passes ``Limits.scratch_mib``, the keeper lowers the child's
RLIMIT_FSIZE (soft and hard, so it cannot be raised again) to 0: every write that would
make a file longer fails with EFBIG, an ``OSError`` in the program, as ENOSPC is on a full
tmpfs. Past the entry cap (as many names as the tmpfs has inodes) the keeper kills the
child, since creating empty files or directories needs no bytes.

What counts is every file by inode (``(st_dev, st_ino)``), whatever still reaches it: a
name in the scratch dir, an open fd, a mapping. A file takes ``max(length, allocated
blocks)`` (blocks include a directory's, a symlink's target, extended attributes' own
block), plus what ``fallocate(FALLOC_FL_KEEP_SIZE)`` put past its end. Files the child
unlinked while it still has them open or mapped, and ``O_TMPFILE`` files that never had a
name, still count: the keeper reads the child's open files from ``/proc/<child>/fd`` (a
file belongs to the scratch dir by its mount, ``_scratch_proc``) and keeps a file without a
name counted while ``/proc/<child>/maps`` shows it mapped.

A charge comes down only at a *settled* moment: a full recount while the child waits on a
gated call (every approved call has completed), or without a gate at any recount. When the
keeper cannot read what it needs (``_scratch_proc.Blind``), it refuses all growth and says
the child must be killed: it never guesses low.

How strict without the gate: the kernel refuses nothing by itself until the keeper acts, so
a burst of writes that lands between one event and the keeper's reaction passes the quota
by what it wrote meanwhile (measured: docs/security.md). Standard library only: the keeper
runs it in the zygote's fork.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import stat
import struct

from .._kernel._syscalls import libc
from ._scratch_proc import Blind, Key, ScratchMount, mapped, open_files, taken

_IN_MODIFY = 0x00000002
_IN_ATTRIB = 0x00000004
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_WATCHED = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
)
_EVENT = struct.Struct("iIII")
_GONE = (errno.ENOENT, errno.ENOTDIR)
MAX_ENTRIES = 65536
"""Names (files, directories, links) the scratch dir may hold: the scratch tmpfs's inodes."""
SLACK_BYTES = 256 * 1024
"""With the gate: how far the count may pass the quota through growth no call asked for
(a filesystem's own metadata, e.g. extent blocks of a sparse file filled through a
mapping) before the keeper ends the run."""


class ScratchQuota:
    """Watches one scratch dir for one child; :meth:`check` after its fd is readable.

    ``refuse_growth``: refuse growth after the fact (RLIMIT_FSIZE 0) once past the quota;
    ``False`` with the write gate, which charges each call before it runs. Raises
    ``OSError`` when inotify cannot be set up (e.g. the user's inotify instances are used
    up) or the scratch dir's mount cannot be read; the keeper then reports the quota as not
    applied.
    """

    def __init__(
        self, path: str, child_pid: int, limit_bytes: int, *, refuse_growth: bool = True
    ) -> None:
        self._root = path
        self._child = child_pid
        self._limit = limit_bytes
        self._refuse_growth = refuse_growth
        self.mount = ScratchMount(path)
        """The mount the scratch dir belongs to: a file opened through it is a scratch file."""
        root = os.lstat(path)
        self._root_key: Key = (root.st_dev, root.st_ino)
        self._root_base = taken(root)  # the dir's own first block is not the program's
        fd: int = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self._fd = fd
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory
        self._folders: set[str] = set()  # every directory path under the root
        self._names: dict[str, Key] = {}  # path -> file, every name under the root
        self._links: dict[Key, int] = {}  # file -> how many of those names it has
        self._taken: dict[Key, int] = {}  # file -> bytes charged, named or still held
        self._reserved: dict[Key, int] = {}  # file -> bytes allocated past its end
        self._unnamed: set[Key] = set()  # files without a name, kept while held or mapped
        self.refused = False
        """Whether the keeper has refused further growth (RLIMIT_FSIZE 0)."""
        self.blind = ""
        """Why the keeper could not see what it needs ("" while it can)."""
        self.names_only = ""
        """Why the count sees names only ("" when it sees the child's open and mapped
        files too): a child without Landlock is not made dumpable, so its /proc is closed
        to its keeper from the start; only without the gate, whose quota is after the fact
        anyway."""
        self.total = 0
        try:
            self._watch_tree(path, settled=True)
            try:
                self._recount()
            except Blind as exc:
                if not refuse_growth:
                    raise
                self.names_only = str(exc)
        except Blind as exc:
            self.close()
            raise OSError(errno.EACCES, str(exc)) from exc
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
    def entries(self) -> int:
        """Names under the scratch dir, and files without one that still count."""
        return len(self._names) + len(self._unnamed)

    def check(self, *, recount: bool = True) -> str:
        """Read the pending events and, with ``recount``, recount what the child holds (a
        settled moment: charges may come down); refuse growth once over the quota (without
        the gate). Returns why the child must be killed ("" while it need not; once blind,
        always that)."""
        if self.blind:
            return self.blind
        try:
            for wd, mask, name in self._events():
                if mask & _IN_Q_OVERFLOW:
                    self._rescan(settled=recount)
                    continue
                folder = self._dirs.get(wd)
                if folder is None or mask & _IN_IGNORED:
                    self._dirs.pop(wd, None)
                    continue
                if name:
                    self._event(folder, name, mask, settled=recount)
            if recount and self.names_only:
                self._free(self._unnamed)  # held or not: it cannot tell
            elif recount:
                self._recount()
        except Blind as exc:
            self.blind = exc.reason
            self._refuse()
            return self.blind
        if self._refuse_growth and self.total > self._limit:
            self._refuse()
        if not self._refuse_growth and self.total > self._limit + SLACK_BYTES:
            return (
                f"the scratch dir holds {self.total} bytes, past its quota of {self._limit} "
                "through growth the keeper's write gate did not see"
            )
        if self.entries > MAX_ENTRIES:
            return (
                f"the scratch dir holds more than {MAX_ENTRIES} files and directories "
                "(the keeper's scratch quota)"
            )
        return ""

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # --- the gate's side: charges before a call runs ----------------------------------

    def charged(self, key: Key) -> int:
        """Bytes the count holds for file ``key`` now (0: not counted)."""
        return self._taken.get(key, 0)

    def reserved(self, key: Key) -> int:
        """Bytes approved for ``fallocate(FALLOC_FL_KEEP_SIZE)`` on file ``key``."""
        return self._reserved.get(key, 0)

    def charge(self, key: Key, after: int, *, reserve: int = 0) -> None:
        """An approved call may make file ``key`` take up to ``after`` bytes (and allocate
        ``reserve`` past its end): count that until a settled moment shows what it took."""
        if reserve:
            self._reserved[key] = self._reserved.get(key, 0) + reserve
        if key not in self._links:
            self._unnamed.add(key)  # its name, if any, comes with a later event
        self._set_taken(key, after, settled=False)

    def takes(self, key: Key, st: os.stat_result) -> int:
        """What file ``key`` with status ``st`` can take without another gated call: its
        length or blocks, and the blocks it may have past its end (a mapping can fill
        every hole within the length)."""
        found = taken(st)
        reserve = self._reserved.get(key, 0)
        if reserve and stat.S_ISREG(st.st_mode):
            blocks = int(st.st_blocks) * 512
            found = max(found, st.st_size + min(reserve, blocks))
        return found

    # --- accounting -------------------------------------------------------------------

    def _refuse(self) -> None:
        if not self.refused:
            self.refused = True
            with contextlib.suppress(ProcessLookupError):
                resource.prlimit(self._child, resource.RLIMIT_FSIZE, (0, 0))

    def _event(self, folder: str, name: str, mask: int, *, settled: bool) -> None:
        path = os.path.join(folder, name)
        if mask & (_IN_DELETE | _IN_MOVED_FROM):
            self._forget(path)
            return
        created = bool(mask & (_IN_CREATE | _IN_MOVED_TO))
        try:
            st = self._lstat(path)
        except Blind:
            if created or path not in self._names:
                raise
            # A name it knows: every growth since was charged, so what it counts holds
            # even where the program has locked the directory since.
            return
        if st is None:  # gone again, or an unlinked/O_TMPFILE file: the fd scan sees it
            self._forget(path)
            return
        self._name(path, st, settled=settled)
        if created:
            self._restat_folder(folder, settled=settled)  # a new name may grow it a block
            if stat.S_ISDIR(st.st_mode):
                self._watch_tree(path, settled=settled)

    @staticmethod
    def _lstat(path: str) -> os.stat_result | None:
        """``None`` for a name that is gone. Raises :class:`Blind` for one the keeper may
        not look at (the program took its directory's permissions away)."""
        try:
            return os.lstat(path)
        except OSError as exc:
            if exc.errno in _GONE:
                return None
            raise Blind(f"cannot stat {path}: {exc.strerror}") from exc

    def _restat_folder(self, folder: str, *, settled: bool) -> None:
        st = self._lstat(folder)
        if st is None:
            return
        if folder == self._root:
            self._set_taken(self._root_key, max(0, taken(st) - self._root_base), settled)
        elif folder in self._names:
            self._name(folder, st, settled=settled)

    def _name(self, path: str, st: os.stat_result, *, settled: bool) -> None:
        """``path`` names file ``(st.st_dev, st.st_ino)`` now."""
        key = (st.st_dev, st.st_ino)
        old = self._names.get(path)
        if old != key:
            if old is not None:
                self._forget(path)
            self._names[path] = key
            self._links[key] = self._links.get(key, 0) + 1
            self._unnamed.discard(key)
            if stat.S_ISDIR(st.st_mode):
                self._folders.add(path)
        self._set_taken(key, self.takes(key, st), settled)

    def _set_taken(self, key: Key, value: int, settled: bool) -> None:
        """Count ``value`` bytes for ``key``; between settled moments only ever more (an
        approved call may still be running)."""
        old = self._taken.get(key, 0)
        if not settled:
            value = max(value, old)
        self.total += value - old
        self._taken[key] = value

    def _forget(self, path: str) -> None:
        """``path`` no longer names its file (a directory: nor anything beneath it)."""
        doomed = [path]
        if path in self._folders:
            prefix = path + os.sep
            doomed += [n for n in self._names if n.startswith(prefix)]
        for name in doomed:
            self._folders.discard(name)
            key = self._names.pop(name, None)
            if key is None:
                continue
            self._links[key] -= 1
            if not self._links[key]:
                del self._links[key]
                self._unnamed.add(key)  # freed once nothing holds it (_recount)

    def _watch_tree(self, top: str, *, settled: bool) -> None:
        """Watch ``top`` and every directory below, then record what is already there
        (watch first: nothing created meanwhile is missed). Raises :class:`Blind` for a
        directory the keeper may not watch or list."""
        stack = [top]
        while stack:
            folder = stack.pop()
            wd = libc.inotify_add_watch(
                self._fd, os.fsencode(folder), _WATCHED | _IN_ONLYDIR | _IN_DONT_FOLLOW
            )
            if wd < 0:
                err = ctypes.get_errno()
                if err in _GONE:
                    continue  # removed or replaced before we got to it
                raise Blind(f"cannot watch {folder}: {os.strerror(err)}")
            self._dirs[wd] = folder
            try:
                with os.scandir(folder) as it:
                    entries = list(it)
            except OSError as exc:
                if exc.errno in _GONE:
                    continue
                raise Blind(f"cannot list {folder}: {exc.strerror}") from exc
            for entry in entries:
                st = self._lstat(entry.path)
                if st is None:
                    continue
                self._name(entry.path, st, settled=settled)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
            self._restat_folder(folder, settled=settled)

    def _rescan(self, *, settled: bool) -> None:
        """The event queue overflowed: start over from the tree itself (what is held open
        without a name is found again by the next recount). Between settled moments the
        charges stay as they were, at least."""
        for wd in list(self._dirs):
            libc.inotify_rm_watch(self._fd, wd)
        self._dirs.clear()
        names = list(self._names)
        for name in names:
            self._forget(name)
        self._watch_tree(self._root, settled=settled)

    def _recount(self) -> None:
        """At a settled moment: what the child's open scratch files take now, and free the
        files without a name that nothing holds any more (no open fd, no mapping). Raises
        :class:`Blind` when the child's fds or mappings cannot be read."""
        held: dict[Key, os.stat_result] = {}
        for f in open_files(self._child):
            # Its own files, named once or open for writing: a file it only reads may be
            # any file of the same mount (the interpreter's, when scratch lies on /).
            if f.mnt_id == self.mount.mnt_id and (f.key in self._taken or f.writable):
                held[f.key] = f.st
        loose = self._unnamed - held.keys()
        if loose:
            inodes = mapped(self._child, self.mount)
            known = {ino for _, ino in self._taken}
            if any(inside and ino not in known for ino, inside in inodes.items()):
                # A mapping in the scratch dir of an inode the count does not know by that
                # number: whatever it is, no file without a name is safe to free.
                loose = set()
            loose = {key for key in loose if key[1] not in inodes}
        for key, st in held.items():
            if key not in self._links:
                self._unnamed.add(key)
            self._set_taken(key, self.takes(key, st), settled=True)
            if not st.st_blocks:
                self._reserved.pop(key, None)  # no block at all: none past the end
        self._free(loose)

    def _free(self, keys: set[Key]) -> None:
        for key in list(keys):
            self._unnamed.discard(key)
            self._reserved.pop(key, None)
            self.total -= self._taken.pop(key, 0)

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
