"""What the ``ptc`` subcommands share: one-line usage errors, ``MODULE:FUNC`` loading and
``--require``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, cast

from worker import DIMENSIONS, Containment, Dimension

from .._errors import PtcError
from .._runtime import ToolRuntime

__all__ = (
    "CliError",
    "Parser",
    "add_require",
    "call_tools_func",
    "containment",
    "help_text",
    "load_tools",
)

# reST inline markup in a docstring: ``literal`` and :role:`target` (or :role:`~a.target`).
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)
_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]+\.)?([^`.]+)`")


class CliError(PtcError):
    """A problem the command reports as one line on stderr and exit status 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def help_text(doc: str | None, paragraph: int = 0) -> str | None:
    """Paragraph ``paragraph`` of a command's docstring as ``--help`` shows it: plain text
    (reST literals and roles unwrapped), the lines joined for argparse to fill."""
    if not doc:
        return None
    text = doc.strip().split("\n\n")[paragraph]
    return " ".join(_ROLE.sub(r"\1", _LITERAL.sub(r"\1", text)).split())


def load_tools(spec: str) -> Callable[[ToolRuntime], object]:
    """``MODULE:FUNC`` (a module on the path, or a ``.py`` file) -> the function, which
    registers tools on the runtime it is given. Raises :class:`CliError`."""
    module_name, sep, func_name = spec.rpartition(":")
    if not sep or not module_name or not func_name:
        raise CliError(f"--tools wants MODULE:FUNC (e.g. my_tools:register), got {spec!r}")
    try:
        if module_name.endswith(".py"):
            module = _load_file(Path(module_name))
        else:
            cwd = os.getcwd()
            if cwd not in sys.path:
                sys.path.insert(0, cwd)  # like `python -m`: modules beside the caller
            module = importlib.import_module(module_name)
    except CliError:
        raise
    except ImportError as exc:
        raise CliError(f"cannot import {module_name!r}: {exc}") from exc
    except Exception as exc:
        raise CliError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise CliError(f"{module_name!r} has no function {func_name!r}")
    return cast(Callable[[ToolRuntime], object], func)


def add_require(parser: Any) -> None:
    """Add ``--require DIM,...|none`` to a subcommand's parser."""
    parser.add_argument(
        "--require",
        metavar="DIM,...|none",
        help="containment dimensions a run needs at full, else it fails closed "
        f"({','.join(DIMENSIONS)}; default: all; none accepts what the host provides)",
    )


def containment(require: str | None) -> Containment | None:
    """The ``Containment`` for ``--require`` (``None`` when the flag is absent: the default,
    all five). Raises :class:`CliError`."""
    if require is None:
        return None
    words = [word.strip() for word in require.split(",")]
    if words == ["none"]:
        return Containment(require=frozenset())
    unknown = [word for word in words if word not in DIMENSIONS]
    if unknown:
        raise CliError(
            f"--require wants dimensions from {','.join(DIMENSIONS)} separated by commas, "
            f"or none; got {require!r}"
        )
    return Containment(require=frozenset(cast(list[Dimension], words)))


async def call_tools_func(func: Callable[[ToolRuntime], object], runtime: ToolRuntime) -> None:
    """``FUNC(runtime)``, awaited if it is a coroutine function. Raises :class:`CliError`."""
    try:
        out = func(runtime)
        if inspect.isawaitable(out):
            await out
    except Exception as exc:
        name = getattr(func, "__qualname__", repr(func))
        raise CliError(f"{name}(runtime) failed: {type(exc).__name__}: {exc}") from exc


def _load_file(path: Path) -> object:
    if not path.is_file():
        raise CliError(f"no such file: {str(path)!r}")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot load {str(path)!r} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
