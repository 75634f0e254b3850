"""Regenerate the golden stubs and modules: ``python -m tests.sdkgen.update_golden``."""

from __future__ import annotations

import sdkgen

from .cases import CASES, GOLDEN_DIR, HEADER


def expected_files() -> dict[str, str]:
    """File name -> content for every representative case (and all of them together)."""
    files = {}
    generator = sdkgen.SdkGenerator()
    for case, specs in {**CASES, "all": [s for v in CASES.values() for s in v]}.items():
        sdk = generator.generate(specs, header=HEADER)
        files[f"{case}.pyi"] = sdk.stub
        files[f"{case}.module.py"] = sdk.module
    return files


def main() -> None:
    GOLDEN_DIR.mkdir(exist_ok=True)
    for stale in GOLDEN_DIR.glob("*.py*"):
        stale.unlink()
    for name, content in expected_files().items():
        (GOLDEN_DIR / name).write_text(content, encoding="utf-8")
    print(f"wrote {len(expected_files())} golden files to {GOLDEN_DIR}")


if __name__ == "__main__":
    main()
