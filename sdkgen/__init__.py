"""JSON Schema -> typed Python SDK: the stub the model reads and the module the worker runs.

``sdkgen`` never imports ``ptc``.
"""

from ._generator import SdkGenerator as SdkGenerator
from ._generator import generate as generate
from ._generator import spec_digest as spec_digest
from ._idents import ident_for_property as ident_for_property
from ._idents import ident_for_tool as ident_for_tool
from ._idents import property_idents as property_idents
from ._idents import tool_idents as tool_idents
from ._pacing import yielding_gil as yielding_gil
from ._types import ParamBinding as ParamBinding
from ._types import Sdk as Sdk
from ._types import ToolBinding as ToolBinding
from ._types import ToolSpec as ToolSpec
from ._types import Transport as Transport

__all__ = (
    "ParamBinding",
    "Sdk",
    "SdkGenerator",
    "ToolBinding",
    "ToolSpec",
    "Transport",
    "generate",
    "ident_for_property",
    "ident_for_tool",
    "property_idents",
    "spec_digest",
    "tool_idents",
    "yielding_gil",
)
