"""Function-calling schemas from the wild (DESIGN section 6): a checked-in sample of the
Berkeley Function Calling Leaderboard's definitions and ground-truth calls goes
``lenient_schema`` -> ``define_tool`` -> SDK (``mypy --strict``) -> a real code-mode run.
Provenance and licence: ``data/README.md``; the whole data set: ``python -m tests.ptc.bfcl``."""

from __future__ import annotations

import pytest

from .bfcl import Counts, check, load_sample
from .data.make_bfcl_sample import features

# Every non-standard form the BFCL data uses (see data/README.md).
FORMS = {
    "type:dict", "type:float", "type:double", "type:long", "type:tuple", "type:any", "type:",
    "type:String", "type:Boolean", "type:char", "type:Array", "type:ArrayList", "type:HashMap",
    "response:items-array", "keyword:optional", "call:tuple", "call:extra-keys",
}  # fmt: skip


@pytest.fixture(scope="module")
def counts() -> Counts:
    return check(load_sample())


def test_the_sample_covers_every_non_standard_form_of_the_data_set() -> None:
    seen = set().union(*(features(record) for record in load_sample()))
    assert FORMS <= seen, FORMS - seen


def test_no_definition_is_standard_as_it_is_and_every_one_is_after_lenient(
    counts: Counts,
) -> None:
    assert (counts.definitions, counts.as_is, counts.after_lenient) == (300, 0, 300)


def test_every_sdk_batch_passes_mypy_strict(counts: Counts) -> None:
    assert counts.sdk_batches == counts.sdk_batches_ok == 13
    assert counts.sdk_definitions_ok == 300


def test_the_fast_path_types_every_input_and_all_but_three_responses(counts: Counts) -> None:
    # The three: keys starting with "_" (renamed) and tuples (prefixItems, a union).
    assert (counts.fast_inputs, counts.fast_tools) == (300, 297)


def test_every_schema_valid_ground_truth_call_round_trips_and_type_checks(
    counts: Counts,
) -> None:
    assert not counts.failures, counts.failures[:5]
    assert (counts.calls, counts.calls_schema_valid) == (802, 753)
    assert counts.calls_round_trip == counts.calls_type_check == 753
