"""SDKs built off the event loop: one per set of visible native tools and request.

An :class:`SdkRequest` says which stub is wanted: the model's (``run_code``'s description:
every tool, or only the pinned ones in search discovery) or the full, type-checkable one
(``scope.sdk()``, with the profile's header); every SDK's worker module and bindings cover
all the tools.

Generation (datamodel-code-generator for new schemas, then assembly) runs on one
background thread. ``submit`` schedules a build and returns its future (a build already
in flight or done is shared); ``ready`` answers without waiting; ``build`` waits in the
calling thread (the sync ``sdk()``/``model_tools()`` when nothing is ready yet) and
``build_async`` waits without blocking the event loop. Each completed build bumps
``revision`` so scopes can refresh what they derived from a pending SDK. On the background
thread (and for ``stub_async``) the generator hands the GIL back every millisecond or so
(:func:`sdkgen.yielding_gil`): a build is tens of milliseconds of Python, and the event
loop would otherwise wait up to the interpreter's switch interval (5 ms) each time it
wakes while one runs.

Fragments are cached per schema digest in memory and, when a cache directory is usable,
on disk (``PTC_CACHE_DIR``, else the user cache directory), so a restarted host is warm.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import platformdirs

import sdkgen
from worker import Profile

from .._calls._tools import ToolDefinition
from .._identity_cache import IdentityCache

__all__ = ("SdkBuilder", "SdkKey", "SdkRequest", "default_cache_dir", "tool_spec")

logger = logging.getLogger("ptc")

_ENTRIES = 128


@dataclass(frozen=True, slots=True)
class SdkRequest:
    """Which stub an SDK carries: ``described`` the tools it shows (``None``: all of them),
    ``full`` the type-checkable form with the profile's header (``scope.sdk()``), else the
    model's form (``run_code``'s description)."""

    profile: Profile
    described: frozenset[str] | None = None
    full: bool = False


SdkKey = tuple[tuple[int, ...], SdkRequest]
"""The ids of the visible native definitions (in view order) and the request."""


_SPECS: IdentityCache[sdkgen.ToolSpec] = IdentityCache(20_000)


def tool_spec(definition: ToolDefinition) -> sdkgen.ToolSpec:
    """What the SDK generator sees of a definition (never its callbacks or policy): one
    spec object per definition, kept while the definition is, so the generator's per-spec
    caches hold across builds (a definition is immutable: its schemas were checked and
    compiled once, when it was made)."""
    spec = _SPECS.get((definition,))
    if spec is not None:
        return spec
    return _SPECS.put(
        (definition,),
        sdkgen.ToolSpec(
            name=definition.name,
            description=definition.description,
            input_schema=definition.input_schema,
            output_schema=definition.output.schema,
        ),
    )


def default_cache_dir() -> Path | None:
    """``$PTC_CACHE_DIR`` or ``<user cache dir>/ptc/sdkgen``; ``None`` if neither is usable
    (``PTC_CACHE_DIR=""`` turns the disk cache off)."""
    configured = os.environ.get("PTC_CACHE_DIR")
    if configured is not None:
        path = Path(configured) if configured else None
    else:
        path = Path(platformdirs.user_cache_dir("ptc")) / "sdkgen"
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK | os.X_OK) else None


class SdkBuilder:
    """Builds and caches SDKs on one background thread (see the module docstring)."""

    def __init__(self, generator: sdkgen.SdkGenerator, header: Callable[[Profile], str]) -> None:
        self._generator = generator
        self._header = header
        self._lock = threading.Lock()
        # key -> (definitions, future): holding the definitions keeps their ids unique. Not
        # an IdentityCache: finding a build and claiming a new one is one step under the lock.
        self._builds: OrderedDict[SdkKey, tuple[tuple[ToolDefinition, ...], Future[sdkgen.Sdk]]]
        self._builds = OrderedDict()
        # Two threads: the model's SDKs (run_code's description) never queue behind a full,
        # type-checkable one (scope.sdk()), which may need every tool's types.
        self._executors: dict[bool, ThreadPoolExecutor] = {}
        self._closed = False
        self.revision = 0

    @staticmethod
    def key(definitions: Sequence[ToolDefinition], request: SdkRequest) -> SdkKey:
        return (tuple(map(id, definitions)), request)

    def ready(
        self, definitions: Sequence[ToolDefinition], request: SdkRequest
    ) -> sdkgen.Sdk | None:
        """The SDK if it is built (never waits)."""
        with self._lock:
            entry = self._builds.get(self.key(definitions, request))
        if entry is None or not entry[1].done() or entry[1].exception() is not None:
            return None
        return entry[1].result()

    def submit(
        self, definitions: Sequence[ToolDefinition], request: SdkRequest
    ) -> Future[sdkgen.Sdk]:
        """Schedule a build on the background thread (or share the one in flight or done)."""
        definitions = tuple(definitions)
        with self._lock:
            future, mine = self._claim(definitions, request)
            if not mine:
                return future
            if self._closed:
                future.set_exception(RuntimeError("the runtime is closed"))
                return future
            if not self._executors:
                self._start_threads()
            self._executors[request.full].submit(
                self._run, future, definitions, request, background=True
            )
        return future

    def _start_threads(self) -> None:
        """Both builder threads, started together before the first build: a thread started
        later would be started while the other one builds, and ``Thread.start()`` waits on
        the event loop's thread until the new thread has run, which is until the busy one
        hands the GIL over (measured: 3 ms of a 6.5 ms stall of ``prepare()``). Called with
        the lock held."""
        for full, name in ((False, "ptc-sdkgen"), (True, "ptc-sdkgen-full")):
            executor = self._executors[full] = ThreadPoolExecutor(1, thread_name_prefix=name)
            executor.submit(_nothing)  # a pool starts its thread on its first task

    def build(self, definitions: Sequence[ToolDefinition], request: SdkRequest) -> sdkgen.Sdk:
        """The SDK, building it in the calling thread if nothing is ready or in flight."""
        sdk = self.ready(definitions, request)
        if sdk is not None:
            return sdk
        definitions = tuple(definitions)
        with self._lock:
            future, mine = self._claim(definitions, request)
        if mine:
            self._run(future, definitions, request, background=False)
        return future.result()

    def _claim(
        self, definitions: tuple[ToolDefinition, ...], request: SdkRequest
    ) -> tuple[Future[sdkgen.Sdk], bool]:
        """The build of this key in flight or done, or a new one (``True``: the caller runs
        it). Called with the lock held."""
        key = self.key(definitions, request)
        entry = self._builds.get(key)
        if entry is not None and not _failed(entry[1]):
            self._builds.move_to_end(key)
            return entry[1], False
        future: Future[sdkgen.Sdk] = Future()
        self._builds[key] = (definitions, future)
        while len(self._builds) > _ENTRIES:
            self._builds.popitem(last=False)
        return future, True

    async def build_async(
        self, definitions: Sequence[ToolDefinition], request: SdkRequest
    ) -> sdkgen.Sdk:
        """The SDK, waiting for the background build without blocking the event loop."""
        sdk = self.ready(definitions, request)
        if sdk is not None:
            return sdk
        definitions = tuple(definitions)
        # Submitted from the worker thread: a builder thread's first start, which waits
        # until the new thread runs, then happens there rather than on the event loop.
        return await anyio.to_thread.run_sync(
            lambda: self.submit(definitions, request).result(), abandon_on_cancel=True
        )

    def warm(self, batches: Sequence[tuple[Sequence[ToolDefinition], SdkRequest]]) -> None:
        """Submit a build for each ``(definitions, request)`` (background; returns at once)."""
        for definitions, request in batches:
            self.submit(definitions, request)

    def stub(
        self,
        definitions: Sequence[ToolDefinition],
        request: SdkRequest,
        described: frozenset[str],
        *,
        background: bool = False,
    ) -> str:
        """The stub of the tools named in ``described`` among ``definitions`` (identifiers
        as in the SDK of all of them), generated in the calling thread (keep it off the
        event loop). ``background``: the calling thread is not the event loop's, so the
        generator hands the GIL back to the loop often."""
        with sdkgen.yielding_gil() if background else contextlib.nullcontext():
            return self._generator.stub(
                [tool_spec(d) for d in definitions],
                described,
                header=self._header(request.profile) if request.full else "",
                prelude=request.full,
            )

    async def stub_async(
        self, definitions: Sequence[ToolDefinition], request: SdkRequest, described: frozenset[str]
    ) -> str:
        """:meth:`stub`, generated on a worker thread without blocking the event loop."""
        return await anyio.to_thread.run_sync(
            lambda: self.stub(definitions, request, described, background=True),
            abandon_on_cancel=True,
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            executors, self._executors = list(self._executors.values()), {}
        for executor in executors:
            executor.shutdown(wait=False, cancel_futures=True)
        self._generator.close()  # the fragment helper process, if it was started

    def _run(
        self,
        future: Future[sdkgen.Sdk],
        definitions: tuple[ToolDefinition, ...],
        request: SdkRequest,
        *,
        background: bool,
    ) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            # On a builder thread the generator hands the GIL back often (the event loop
            # waits for it otherwise); in the caller's thread it must not.
            with sdkgen.yielding_gil() if background else contextlib.nullcontext():
                specs = [tool_spec(d) for d in definitions]
                sdk = self._generator.generate(
                    specs,
                    header=self._header(request.profile) if request.full else "",
                    described=request.described,
                    prelude=request.full,
                )
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
            if not self._closed:  # a close abandons the build in progress: no news
                logger.exception("SDK generation failed")
            future.set_exception(exc)
            return
        with self._lock:
            self.revision += 1  # before the result: a waiter's next view() must see it
        future.set_result(sdk)


def _failed(future: Future[sdkgen.Sdk]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


def _nothing() -> None:
    """A task that starts a builder thread and does nothing."""
