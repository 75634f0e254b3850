"""SDK generation in a process of its own, for a cold cache.

datamodel-code-generator holds the GIL for long stretches (its import builds many pydantic
models; each generation parses and formats source), and so does assembling and rendering
in a thread of the host it stalls the host's event loop for tens of milliseconds.
:class:`FragmentProcess` generates fragments in a helper process instead: one JSON line per
request on the helper's stdin (the specs and their type prefixes), one JSON line back with
their fragments, which the host checks like a disk-cache entry (:mod:`._fragment_check`)
before it uses them. The helper keeps its own fragment cache and writes the disk cache the
host reads, so a later (or restarted) host finds them there. The helper lives until
:meth:`FragmentProcess.close` or until its stdin closes (the host went away).

Started as ``<python> -I -c <boot> <root> [<cache dir>]`` with an empty environment;
``<root>`` is the directory holding ``sdkgen`` (for an uninstalled checkout; an installed
package wins).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._fragment import TypeFragment
from ._fragment_check import checked_fragment
from ._types import ToolSpec

__all__ = ("FragmentProcess", "GeneratorClosed")

logger = logging.getLogger("sdkgen")

_BOOT: Final = (
    "import sys; sys.path.append(sys.argv[1]); "
    "from sdkgen._fragment_server import serve; serve(sys.argv[2] if len(sys.argv) > 2 else None)"
)
MAX_LINE: Final = 256 * 1024 * 1024


class GeneratorClosed(RuntimeError):
    """The generator was closed while it generated (the generation was abandoned)."""

    def __init__(self) -> None:
        super().__init__("the SDK generator was closed during the generation")


class FragmentProcess:
    """The host's handle on the helper process (thread-safe; one request at a time)."""

    def __init__(self, cache_dir: str | None = None) -> None:
        self._cache_dir = cache_dir
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._closed = False
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def fragments(self, items: Sequence[tuple[ToolSpec, str]]) -> list[TypeFragment | None] | None:
        """The fragment of each ``(spec, type prefix)`` (``None`` for one that came back
        malformed), or ``None`` when the helper could not answer (it is then restarted on
        the next call; the caller generates in-process)."""
        payload = {
            "fragments": [
                {
                    "spec": {
                        "name": spec.name,
                        "description": spec.description,
                        "input_schema": _plain(spec.input_schema),
                        "output_schema": _plain(spec.output_schema),
                    },
                    "prefix": prefix,
                }
                for spec, prefix in items
            ],
        }
        with self._lock:
            if self._closed:
                return None
            try:
                process = self._started()
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write(json.dumps(payload).encode() + b"\n")
                process.stdin.flush()
                line = process.stdout.readline(MAX_LINE)
                reply = json.loads(line) if line else None
            except (OSError, ValueError, RecursionError) as exc:
                if self._closed:
                    raise GeneratorClosed from exc
                logger.warning("the SDK fragment helper failed (%s); generating in-process", exc)
                self._stop()
                return None
            if self._closed:  # close() killed the helper under this request
                raise GeneratorClosed
        if type(reply) is not dict or reply.get("ok") is not True:
            why = reply.get("error") if isinstance(reply, dict) else "it exited"
            logger.warning("the SDK fragment helper could not generate (%s)", why)
            if reply is None:
                self._stop()
            return None
        made = reply.get("fragments")
        if type(made) is not list or len(made) != len(items):
            logger.warning("the SDK fragment helper sent a malformed answer; ignored")
            return None
        # The helper is another process: what it sends is checked like a disk-cache entry.
        return [checked_fragment(item) for item in made]

    @property
    def running(self) -> bool:
        process = self._process
        return process is not None and process.poll() is None

    def close(self) -> None:
        """Stop the helper (closing its stdin; killed if it lingers). Idempotent. A
        request in progress is not waited for: the helper is killed under it, and that
        :meth:`fragments` raises :class:`GeneratorClosed` (no in-process fallback)."""
        self._closed = True
        if not self._lock.acquire(blocking=False):
            process = self._process
            if process is not None:
                with contextlib.suppress(OSError):
                    process.kill()  # its reader sees EOF at once
            self._lock.acquire()
        try:
            self._stop()
        finally:
            self._lock.release()

    def _started(self) -> subprocess.Popen[bytes]:
        process = self._process
        if process is not None and process.poll() is None:
            return process
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        argv = [os.path.abspath(sys.executable), "-I", "-c", _BOOT, root]
        if self._cache_dir is not None:
            argv.append(self._cache_dir)
        process = self._process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            close_fds=True,
        )
        # A host that never closes its generator (or runtime) still leaves nothing behind.
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _reap, process)
        return process

    def _stop(self) -> None:
        process, self._process = self._process, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if process is not None:
            _reap(process)


def _reap(process: subprocess.Popen[bytes]) -> None:
    """End the helper: EOF on its stdin (it exits), killed if it lingers; pipes closed."""
    try:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=2)
    except (OSError, subprocess.TimeoutExpired):
        process.kill()
        process.wait()
    finally:
        if process.stdout is not None:
            process.stdout.close()


def _plain(value: object) -> Any:
    """A JSON copy of a (possibly read-only or mapping-typed) schema."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
