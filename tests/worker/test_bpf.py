"""The classic BPF assembler: jumps resolved to labels, and the mistakes it refuses."""

from __future__ import annotations

import struct

import pytest

from worker import _bpf


def _unpack(program: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack_from("=HBBI", program, at) for at in range(0, len(program), 8)]


def test_jumps_skip_to_their_labels() -> None:
    p = _bpf.Program()
    p.load(_bpf.NR_OFFSET)
    p.jump(_bpf.JEQ_K, 7, yes="seven")
    p.jump(_bpf.JSET_K, 0x40, yes="seven", no="other")
    p.goto("other")
    p.label("seven")
    p.ret(_bpf.RET_ALLOW)
    p.label("other")
    p.ret(_bpf.RET_ERRNO | 1)
    assert _unpack(p.assemble()) == [
        (_bpf.LD_W_ABS, 0, 0, _bpf.NR_OFFSET),
        (_bpf.JEQ_K, 2, 0, 7),
        (_bpf.JSET_K, 1, 2, 0x40),
        (_bpf.JA, 0, 0, 1),
        (_bpf.RET_K, 0, 0, _bpf.RET_ALLOW),
        (_bpf.RET_K, 0, 0, _bpf.RET_ERRNO | 1),
    ]


def test_arguments_are_read_at_their_low_half() -> None:
    assert [_bpf.arg_low(i) for i in range(3)] == [16, 24, 32]


@pytest.mark.parametrize("mistake", ["backwards", "nowhere", "twice"])
def test_a_bad_jump_or_label_is_refused(mistake: str) -> None:
    p = _bpf.Program()
    p.label("top")
    if mistake == "backwards":
        p.jump(_bpf.JEQ_K, 1, yes="top")
    elif mistake == "nowhere":
        p.goto("missing")
    else:
        with pytest.raises(ValueError, match="twice"):
            p.label("top")
        return
    p.ret(_bpf.RET_ALLOW)
    with pytest.raises(ValueError):
        p.assemble()


def test_a_jump_past_255_instructions_is_refused() -> None:
    p = _bpf.Program()
    p.jump(_bpf.JEQ_K, 1, yes="far")
    for _ in range(256):
        p.ret(_bpf.RET_ALLOW)
    p.label("far")
    p.ret(_bpf.RET_ALLOW)
    with pytest.raises(ValueError, match="skips 256"):
        p.assemble()
