"""The golden stubs and modules are current (regenerate: python -m tests.sdkgen.update_golden)."""

from __future__ import annotations

import pytest

from .cases import GOLDEN_DIR
from .update_golden import expected_files

_EXPECTED = expected_files()


@pytest.mark.parametrize("name", sorted(_EXPECTED))
def test_golden_file_is_current(name: str) -> None:
    path = GOLDEN_DIR / name
    assert path.exists(), f"missing {path}; run python -m tests.sdkgen.update_golden"
    assert path.read_text(encoding="utf-8") == _EXPECTED[name], (
        f"{path} is stale; run python -m tests.sdkgen.update_golden"
    )


def test_no_orphan_golden_files() -> None:
    assert {p.name for p in GOLDEN_DIR.glob("*.py*")} == set(_EXPECTED)
