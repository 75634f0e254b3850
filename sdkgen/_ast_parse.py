"""``ast.parse`` behind one lock, for every thread of the host.

CPython 3.11 keeps the recursion depth of its AST conversion (C tree to Python objects, and
back for ``compile``) in state every thread shares (python/cpython#106905): two threads
converting at once, one of them paused midway (a garbage collection, a thread switch), can
end in ``SystemError: AST constructor recursion depth mismatch``. ptc builds SDKs on builder
threads while pre-flight parses programs on others, so every parse sdkgen does holds
:data:`AST_LOCK`, and so does ptc's pre-flight. A parse is short (a type expression, one
tool's module): waiting for one costs the other little.
"""

from __future__ import annotations

import ast
import threading
from typing import Literal, overload

AST_LOCK = threading.RLock()


@overload
def parse(source: str, mode: Literal["exec"] = "exec") -> ast.Module: ...
@overload
def parse(source: str, mode: Literal["eval"]) -> ast.Expression: ...
def parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse(source, mode=mode)``, holding :data:`AST_LOCK`."""
    with AST_LOCK:
        return ast.parse(source, mode=mode)
