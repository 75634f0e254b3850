"""The public surface of sdkgen is pinned."""

from __future__ import annotations

import sdkgen


def test_all_names_are_exported_and_nothing_else_is_public() -> None:
    assert sdkgen.__all__ == (
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
    public = {n for n in vars(sdkgen) if not n.startswith("_")}
    assert public == set(sdkgen.__all__)


def test_sdkgen_never_imports_ptc() -> None:
    import subprocess
    import sys

    code = "import sys, sdkgen; sdkgen.generate([]); print('ptc' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
