"""``sdkgen``'s modules form a one-way stack, read no other module's private attributes
and never import ``ptc``, ``worker``, ``benchmarks`` or ``tests``."""

from __future__ import annotations

from tests._layering import Package, find_cycle, without_face

SDKGEN = Package("sdkgen")


def test_the_modules_of_sdkgen_form_a_one_way_stack() -> None:
    cycle = find_cycle(without_face(SDKGEN.graph(), "sdkgen"))
    assert cycle is None, " -> ".join(cycle or [])


def test_sdkgen_imports_nothing_of_ours_but_itself() -> None:
    for name in SDKGEN.trees:
        ours = {
            i
            for i in SDKGEN.imports_of(name)
            if i.split(".")[0] in {"ptc", "worker", "benchmarks", "tests"}
        }
        assert not ours, f"{name} imports {sorted(ours)}"


def test_no_module_reaches_into_another_modules_private_attributes() -> None:
    assert SDKGEN.private_reads() == []
