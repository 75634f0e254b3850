"""Built-in example tools over a shipped, deterministic data set (demo and benchmarks)."""

from ._tools import EXAMPLE_TOOL_NAMES as EXAMPLE_TOOL_NAMES
from ._tools import build_runtime as build_runtime
from ._tools import polls_until_done as polls_until_done
from ._tools import register_example_tools as register_example_tools

__all__ = (
    "EXAMPLE_TOOL_NAMES",
    "build_runtime",
    "polls_until_done",
    "register_example_tools",
)
