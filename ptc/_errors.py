"""The exceptions ptc raises: one root, a small tree.

```
PtcError                    root of everything ptc raises on purpose
 ├── DefinitionError        (ValueError) a tool definition ptc cannot accept: name, description,
 │    │                     timeout, a reserved or duplicate name
 │    └── SchemaError       (ValueError) a JSON Schema that fails its meta-schema or reaches
 │                          outside itself; ``problems`` lists each one with its JSON path
 ├── ConfigurationError     (ValueError) a runtime option, event name, mode or profile that
 │                          does not exist
 ├── NotJSONError           (ValueError) a value that is not lossless JSON; ``path`` says where
 ├── ScopeError             (ValueError) a scope operation that cannot be done: a duplicate child,
 │                          a bad ``restrict()``, a second ``present_as()``
 ├── SuspensionError        (ValueError) a suspended run that cannot be resumed: unknown token,
 │                          resumed already, another scope, expired, a refused record
 ├── SessionError           (ValueError) a session that cannot be opened or used: unknown id,
 │                          another scope, a stored state that fails its binding (refused)
 ├── UsageError             (TypeError) an argument of the wrong kind: a listener that is not
 │                          callable, ``Accept(content=..., value=...)``
 ├── SearchUnavailable      (RuntimeError) ``search_tools`` cannot rank: this Python's
 │                          ``sqlite3`` lacks FTS5
 └── ClosedError            (RuntimeError) the runtime or the scope is closed
```

Each class also derives from the built-in exception a caller would expect (``ValueError``,
``TypeError``, ``RuntimeError``), so ``except ValueError`` keeps working.

What a *model* causes is never raised: unknown tools, invalid arguments, denials, tool
failures and failed programs come back as :class:`ptc.ToolResult` with an error code.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = (
    "ClosedError",
    "ConfigurationError",
    "DefinitionError",
    "NotJSONError",
    "PtcError",
    "SchemaError",
    "ScopeError",
    "SearchUnavailable",
    "SessionError",
    "SuspensionError",
    "UsageError",
)


class PtcError(Exception):
    """Root of every exception ptc raises on purpose."""


class DefinitionError(PtcError, ValueError):
    """A tool definition ptc cannot accept (the message names the tool and the field)."""


class SchemaError(DefinitionError):
    """A schema failed its checks; ``problems`` holds every problem, each with its path."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("not a valid JSON Schema: " + "; ".join(self.problems))


class ConfigurationError(PtcError, ValueError):
    """A runtime option, event name, mode or profile that does not exist."""


class NotJSONError(PtcError, ValueError):
    """A value is not lossless JSON; ``path`` is a JSON path like ``$.items[2]``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class ScopeError(PtcError, ValueError):
    """A scope operation that cannot be done (the message says why and what would work)."""


class SuspensionError(PtcError, ValueError):
    """A suspended run cannot be resumed (the message says why); a record is never run
    unless it passed its checks."""


class SessionError(PtcError, ValueError):
    """A session cannot be opened or its stored state cannot be used (the message says
    why); a state that fails its binding is refused before any worker sees it."""


class UsageError(PtcError, TypeError):
    """An argument of the wrong kind was passed to a ptc API."""


class SearchUnavailable(PtcError, RuntimeError):
    """Tool search cannot run here: this Python's ``sqlite3`` was built without FTS5 (never
    seen on a current build). ``scope.search_tools`` raises it; a program's
    ``catalog.search`` gets it as a failed call."""


class ClosedError(PtcError, RuntimeError):
    """The runtime or the scope is closed."""
