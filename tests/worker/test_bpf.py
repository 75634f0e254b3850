"""The classic BPF assembler (``_bpf.Assembler``): jumps resolved to labels, and the jumps
BPF cannot take refused. (The filters it writes are loaded for real in test_seccomp.py and
test_gate_filter.py.)"""

from __future__ import annotations

import struct

import pytest

from worker._kernel import _bpf


def _unpack(program: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack_from("=HBBI", program, at) for at in range(0, len(program), 8)]


def test_jumps_skip_to_their_labels() -> None:
    asm = _bpf.Assembler()
    asm.emit(_bpf.LD_W_ABS, _bpf.NR_OFFSET)
    asm.emit(_bpf.JEQ_K, 7, jt="seven")
    asm.emit(_bpf.JSET_K, 0x40, jt="seven", jf="other")
    asm.label("seven")
    asm.emit(_bpf.RET_K, _bpf.RET_ALLOW)
    asm.label("other")
    asm.emit(_bpf.RET_K, _bpf.RET_ERRNO | 1)
    assert _unpack(asm.program()) == [
        (_bpf.LD_W_ABS, 0, 0, _bpf.NR_OFFSET),
        (_bpf.JEQ_K, 1, 0, 7),
        (_bpf.JSET_K, 0, 1, 0x40),
        (_bpf.RET_K, 0, 0, _bpf.RET_ALLOW),
        (_bpf.RET_K, 0, 0, _bpf.RET_ERRNO | 1),
    ]


def test_arguments_are_read_at_their_low_and_high_halves() -> None:
    assert [_bpf.arg_low(i) for i in range(3)] == [16, 24, 32]
    assert [_bpf.arg_high(i) for i in range(3)] == [20, 28, 36]


def test_a_jump_backwards_or_past_255_instructions_is_refused() -> None:
    back = _bpf.Assembler()
    back.label("top")
    back.emit(_bpf.JEQ_K, 1, jt="top")
    with pytest.raises(ValueError):
        back.program()
    far = _bpf.Assembler()
    far.emit(_bpf.JEQ_K, 1, jt="far")
    for _ in range(256):
        far.emit(_bpf.RET_K, _bpf.RET_ALLOW)
    far.label("far")
    far.emit(_bpf.RET_K, _bpf.RET_ALLOW)
    with pytest.raises(ValueError, match="jump of 256"):
        far.program()


def test_a_chained_program_jumps_to_the_second_where_the_first_allows() -> None:
    first = _bpf.pack(
        [
            (_bpf.LD_W_ABS, 0, 0, _bpf.NR_OFFSET),
            (_bpf.JEQ_K, 0, 1, 7),
            (_bpf.RET_K, 0, 0, _bpf.RET_ERRNO | 1),
            (_bpf.RET_K, 0, 0, _bpf.RET_ALLOW),
        ]
    )
    then = _bpf.pack([(_bpf.RET_K, 0, 0, _bpf.RET_ERRNO | 2)])
    assert _unpack(_bpf.chain(first, then)) == [
        (_bpf.LD_W_ABS, 0, 0, _bpf.NR_OFFSET),
        (_bpf.JEQ_K, 0, 1, 7),  # offsets within the first part are untouched
        (_bpf.RET_K, 0, 0, _bpf.RET_ERRNO | 1),  # a refusal stays a refusal
        (_bpf.JA, 0, 0, 0),  # "allow" goes on to the second part, right after
        (_bpf.RET_K, 0, 0, _bpf.RET_ERRNO | 2),
    ]


def test_every_allow_of_the_per_child_filter_falls_through_to_the_base() -> None:
    rules = tuple((400 + i, rule) for i, rule in enumerate(_bpf.SELF_RULES))
    own = _bpf.self_filter(1234, arch=0xC000003E, rules=rules)
    base = _bpf.pack([(_bpf.RET_K, 0, 0, _bpf.RET_ALLOW)])
    chained = _unpack(_bpf.chain(own, base))
    count = len(own) // 8
    assert len(chained) == count + 1
    for index, (code, _, _, k) in enumerate(chained[:count]):
        assert not (code == _bpf.RET_K and k == _bpf.RET_ALLOW)
        if code == _bpf.JA:
            assert index + 1 + k == count  # lands on the base's first instruction
    assert sum(code == _bpf.JA for code, _, _, _ in chained) == len(_bpf.SELF_RULES) + 1
