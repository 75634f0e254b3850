"""JSON Schema -> typed Python SDK: the stub the model reads and the module the worker runs.

``sdkgen`` never imports ``ptc``.
"""

from ._types import ParamBinding as ParamBinding
from ._types import Sdk as Sdk
from ._types import ToolBinding as ToolBinding
from ._types import ToolSpec as ToolSpec
from ._types import Transport as Transport

__all__ = ("ParamBinding", "Sdk", "ToolBinding", "ToolSpec", "Transport")
