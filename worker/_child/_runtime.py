"""The child's main loop: ready, (sdk,) start, run one program, done, exit.

Runs inside an already contained child (the zygote applied containment before calling
:func:`serve`). Imports only the standard library and RestrictedPython.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import sys
import threading
from types import CodeType
from typing import Any, NoReturn

from .._errors import ProtocolError
from .._protocol._framing import encode, scrub_text
from .._protocol._messages import (
    MAX_LOG_MESSAGE_CHARS,
    MAX_LOG_NAME_CHARS,
    MAX_SAVED_NAME_CHARS,
    MAX_SAVED_NAMES,
    MAX_SAVED_TEXT_CHARS,
)
from .._protocol._state import StateReceiver, state_frames
from .._types import SESSION_SAVED_KINDS, Limits
from ._carry import SDK_NAMES
from ._limits import apply_limits
from ._outcome import ProgramResult, ProgramStop, cap_text, check_result
from ._program import run_program
from ._session import RestoreError, Saved, restore, save
from ._transport import Channel, ChannelTransport

_EXIT_BAD_START = 71
_EXIT_CRASH = 72
_FLUSH_BYTES = 8192
PRECOMPILED_SDKS = 4
"""How many SDK modules the zygote keeps compiled (the most recent ones)."""
_PRECOMPILED: dict[str, CodeType] = {}


class FrameWriter(io.BufferedIOBase):
    """The bytes under the program's ``sys.stdout``/``sys.stderr`` (two ``io.TextIOWrapper``
    over it, UTF-8, as a script's): text goes out as ``stdout`` frames.

    Buffered, flushed at a newline, past 8 KiB, before every call and at the end, so
    output and calls reach the host in the order the program made them. Past
    ``stream_bytes`` in total (log records count too, see :meth:`reserve`) it stops the
    run with ``output-limit`` (the host would kill it anyway; this way the excess is
    never sent). A lone surrogate leaves as U+FFFD, bytes that are not UTF-8 as U+FFFD.
    """

    def __init__(self, channel: Channel, *, stream_bytes: int) -> None:
        super().__init__()
        self._channel = channel
        self._stream_bytes = stream_bytes
        self._lock = threading.RLock()
        self._buffer: list[str] = []
        self._buffered = 0
        self._sent_bytes = 0
        self.stop: ProgramStop | None = None

    name = "<stdout>"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def text_streams(self) -> tuple[io.TextIOWrapper, io.TextIOWrapper]:
        """``sys.stdout`` and ``sys.stderr`` for the program: both write straight through
        to this buffer, so their output keeps the order it was written in."""
        return (
            io.TextIOWrapper(self, encoding="utf-8", errors="surrogatepass", write_through=True),
            io.TextIOWrapper(self, encoding="utf-8", errors="surrogatepass", write_through=True),
        )

    def write(self, data: bytes) -> int:  # type: ignore[override]
        size = len(data)
        try:
            text = bytes(data).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            text = bytes(data).decode("utf-8", "replace")
        with self._lock:
            self._check_budget(size)
            self._buffer.append(text)
            self._buffered += size
            if "\n" in text or self._buffered >= _FLUSH_BYTES:
                self.flush()
        return size

    def reserve(self, size: int) -> None:
        """Count ``size`` bytes of something else streamed (a log record) against the
        budget: output buffered so far is flushed first, so the order is kept."""
        with self._lock:
            self._check_budget(size)
            self.flush()
            self._sent_bytes += size

    def _check_budget(self, size: int) -> None:
        if self._sent_bytes + self._buffered + size > self._stream_bytes:
            self.flush()
            self.stop = ProgramStop(
                "output-limit",
                f"the program printed or logged more than {self._stream_bytes} bytes "
                "(Limits.stream_bytes)",
            )
            raise self.stop

    def flush(self) -> None:
        with self._lock:
            if not self._buffer:
                return
            data = "".join(self._buffer)
            self._buffer.clear()
            self._sent_bytes += self._buffered
            self._buffered = 0
            # A lone surrogate cannot cross as UTF-8 text; show it as U+FFFD instead.
            self._channel.send({"type": "stdout", "data": scrub_text(data)})


class FrameLogHandler(logging.Handler):
    """Sends each ``logging`` record as a ``log`` frame (message already formatted).

    A message longer than ``MAX_LOG_MESSAGE_CHARS`` is cut around a marker; its bytes count
    against ``stream_bytes`` together with stdout."""

    def __init__(self, channel: Channel, writer: FrameWriter) -> None:
        super().__init__()
        self._channel = channel
        self._writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            if record.exc_info:
                msg += "\n" + logging.Formatter().formatException(record.exc_info)
            msg = scrub_text(cap_text(msg, MAX_LOG_MESSAGE_CHARS))
            self._writer.reserve(len(msg.encode("utf-8")))
            self._channel.send(
                {
                    "type": "log",
                    "record": {
                        "name": scrub_text(str(record.name)[:MAX_LOG_NAME_CHARS]),
                        "levelno": int(record.levelno),
                        "levelname": scrub_text(str(record.levelname)[:MAX_LOG_NAME_CHARS]),
                        "msg": msg,
                        "created": float(record.created),
                    },
                }
            )
        except ProgramStop:
            raise
        except (ProtocolError, ValueError, TypeError):  # e.g. a NaN timestamp: drop the record
            self.handleError(record)
        except Exception:  # noqa: BLE001 - logging must never break the program
            self.handleError(record)


def serve(sock: socket.socket, enforcement: dict[str, Any], *, rlimits: bool = True) -> NoReturn:
    """Speak the protocol on ``sock`` for one run, then exit the process.

    After ``ready`` the host may send ``limits`` (the child sets the run's rlimits on itself
    and answers with what it set; ``rlimits``: whether it may), then ``sdk`` (while the child
    waits in the pool: the SDK module is executed, compiled by the zygote or now, and the
    run's code paths warmed up, all off the run's critical path) and then ``start``, whose
    ``sdk_module`` is empty in that case; or ``start`` alone, carrying the module."""
    try:
        channel = Channel(sock)
        channel.send({"type": "ready", "pid": os.getpid(), "enforcement": enforcement})
        frame = channel.recv()
        if frame["type"] == "limits":
            channel.send(apply_limits(frame, enabled=rlimits))
            frame = channel.recv()
        sdk: LoadedSdk | None = None
        if frame["type"] == "sdk":
            sdk = load_sdk(frame["module"])
            _warm_up()
            frame = channel.recv()
        if frame["type"] != "start" or (sdk is not None and frame["sdk_module"]):
            os._exit(_EXIT_BAD_START)
        result = run_started(channel, frame, sdk)
        channel.finish(result.encoded())
    except BaseException:  # noqa: BLE001 - the host reports worker-exit; nothing to print to
        os._exit(_EXIT_CRASH)
    os._exit(0)


def _warm_up() -> None:
    """Run the run's own code paths once while the child waits in the pool: the pages they
    write (reference counts, mostly) are copied from the zygote's now, not during the run
    (about 0.3 ms of page faults here; the price is about 0.35 MiB more per pooled child).
    Nothing of it is left where a program could see it."""
    # Not a session's save and restore: most runs have none, and each pooled child would
    # hold the pages they touch (about 0.3 MiB more PSS).
    run_program("x = [1]\nx", profile="python", names={}, result_bytes=1 << 20)
    check_result({"a": [1, "b", 1.5, None, True]}, result_bytes=1 << 20)
    encode({"type": "done", "ok": True, "value": 1})
    Limits()


class LoadedSdk:
    """The SDK module executed into its own namespace (or why it failed to load)."""

    def __init__(self, names: dict[str, Any], error: BaseException | None) -> None:
        self.names = names
        self.error = error


def precompile_sdk(module: str) -> bool:
    """Compile an SDK module ahead of the children that will load it (the zygote does,
    before it forks them): they then execute the code objects, shared pages, instead of
    compiling the module each (about 3 ms and 1.5 MiB per child here). Compiling runs
    nothing. A module that does not compile is left to the child, which reports why."""
    if module in _PRECOMPILED:
        return True
    try:
        code = compile(module, "<sdk>", "exec")
    except Exception:  # noqa: BLE001 - SyntaxError, RecursionError, ...: the child says
        return False
    while len(_PRECOMPILED) >= PRECOMPILED_SDKS:
        del _PRECOMPILED[next(iter(_PRECOMPILED))]
    _PRECOMPILED[module] = code
    return True


def load_sdk(module: str) -> LoadedSdk:
    """Execute the worker module (compiled by the zygote, or now); its transport is bound
    later, at ``start`` (the module reads ``__transport__`` only when a tool is called)."""
    names: dict[str, Any] = {"__transport__": None, "__name__": "ptc_sdk"}
    try:
        code = _PRECOMPILED.get(module)
        exec(code if code is not None else compile(module, "<sdk>", "exec"), names)
    except BaseException as exc:  # noqa: BLE001 - a broken SDK is the run's failure
        return LoadedSdk(names, exc)
    return LoadedSdk(names, None)


def run_started(
    channel: Channel, start: dict[str, Any], sdk: LoadedSdk | None = None
) -> ProgramResult:
    """Run the program of a validated ``start`` frame with capture installed (``sdk``: the
    module an ``sdk`` frame already loaded, else ``start["sdk_module"]`` is loaded now)."""
    limits = Limits(**start["limits"])
    writer = FrameWriter(channel, stream_bytes=limits.stream_bytes)
    stdout, sys.stderr = writer.text_streams()
    sys.stdout = stdout
    root = logging.getLogger()
    root.handlers[:] = [FrameLogHandler(channel, writer)]

    stops: list[ProgramStop] = []
    transport = ChannelTransport(
        channel, max_calls=limits.max_calls, before_call=writer.flush, on_stop=stops.append
    )
    if sdk is None:
        sdk = load_sdk(start["sdk_module"])
    if sdk.error is not None:
        return ProgramResult.failure("exception", f"the SDK module failed to load: {sdk.error!r}")
    names = sdk.names
    names["__transport__"] = transport
    sdk_names = {k: names[k] for k in SDK_NAMES if k in names}
    session = start["session"]
    namespace: dict[str, Any] | None = None
    if session is not None:
        blob = _receive_state(channel, session["bytes"])
        try:
            namespace = restore(
                blob, profile=start["profile"], sdk=sdk_names, files_root=os.getcwd()
            )
        except RestoreError as exc:
            return ProgramResult.failure(
                "exception",
                f"the session's state could not be restored ({exc}); the program did not "
                "run. Run it with reset=true to start from an empty session",
            )

    def stopped() -> ProgramStop | None:
        return writer.stop or (stops[0] if stops else None)

    try:
        result = run_program(
            start["code"],
            profile=start["profile"],
            names=sdk_names,
            result_bytes=limits.result_bytes,
            write=stdout.write,
            stopped=stopped,
            namespace=namespace,
        )
    finally:
        writer.flush()
    if namespace is not None and (result.ok or result.kind in SESSION_SAVED_KINDS):
        try:
            saved = save(
                namespace,
                profile=start["profile"],
                sdk=sdk_names,
                files_root=os.getcwd(),
                max_bytes=limits.session_mib * 1024 * 1024,
            )
        except Exception as exc:  # noqa: BLE001 - a file the program made unreadable, ...
            saved = Saved(None, problem=f"the state could not be saved: {exc!r}")
        _send_state(channel, saved)
    return result


def _receive_state(channel: Channel, size: int) -> bytes:
    """The state the host announced in ``start`` (``size`` bytes), from its ``state``
    frames; anything else from the host breaks the protocol (the child exits)."""
    receiver = StateReceiver(size)
    while receiver.received < size:
        frame = channel.recv()
        if frame["type"] != "state":
            os._exit(_EXIT_BAD_START)
        try:
            receiver.feed(frame["data"])
        except ProtocolError:
            os._exit(_EXIT_BAD_START)
    return receiver.blob()


def _name(text: str) -> str:
    return scrub_text(cap_text(text, MAX_SAVED_NAME_CHARS - 64))


def _text(text: str) -> str:
    return scrub_text(cap_text(text, MAX_SAVED_TEXT_CHARS - 64))


def _send_state(channel: Channel, saved: Saved) -> None:
    """The saved state's ``state`` frames, then ``saved`` (before ``done``)."""
    blob = saved.blob or b""
    for frame in state_frames(blob):
        channel.send_encoded(frame)
    channel.send(
        {
            "type": "saved",
            "bytes": len(blob),
            "names": [_name(n) for n in saved.names[:MAX_SAVED_NAMES]],
            "dropped": [
                {"name": _name(n), "reason": _text(r)}
                for n, r in saved.dropped[:MAX_SAVED_NAMES]
            ],
            "problem": _text(saved.problem),
        }
    )
