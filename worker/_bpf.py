"""Classic BPF as seccomp reads it (``linux/filter.h``, ``linux/seccomp.h``): the few
instructions a hand-written filter needs, and :class:`Program`, which resolves jumps to
labels (a jump is an 8-bit count of instructions to skip, easy to get wrong by hand).

``seccomp_data`` is read little-endian (x86_64, aarch64): an argument's low 32 bits sit at
its offset, the high ones 4 bytes on.
"""

from __future__ import annotations

import struct

LD_W_ABS = 0x20
JEQ_K = 0x15
JSET_K = 0x45
JA = 0x05
RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
NR_OFFSET = 0
ARCH_OFFSET = 4


def arg_low(index: int) -> int:
    """Offset of the low 32 bits of ``seccomp_data.args[index]``."""
    return 16 + 8 * index


class Program:
    """A filter being written: instructions whose jump targets are labels."""

    def __init__(self) -> None:
        self._code: list[tuple[int, str | None, str | None, int]] = []
        self._labels: dict[str, int] = {}
        self._gotos: dict[int, str] = {}  # a JA's target is its k, not its jt/jf

    def load(self, offset: int) -> None:
        """Load the 32-bit word of ``seccomp_data`` at ``offset``."""
        self._code.append((LD_W_ABS, None, None, offset))

    def jump(self, op: int, k: int, yes: str | None = None, no: str | None = None) -> None:
        """``JEQ_K``/``JSET_K`` against ``k``: to label ``yes`` if it holds, else ``no``
        (``None``: the next instruction)."""
        self._code.append((op, yes, no, k))

    def goto(self, label: str) -> None:
        """Jump to label ``label`` whatever holds."""
        self._code.append((JA, None, None, 0))
        self._gotos[len(self._code) - 1] = label

    def ret(self, value: int) -> None:
        self._code.append((RET_K, None, None, value))

    def label(self, name: str) -> None:
        """Name the next instruction."""
        if name in self._labels:
            raise ValueError(f"label {name!r} twice")
        self._labels[name] = len(self._code)

    def assemble(self) -> bytes:
        """The packed ``sock_filter`` instructions. Raises ``ValueError`` for a jump
        backwards, too far, or to no label."""
        out = []
        for at, (op, yes, no, k) in enumerate(self._code):
            if at in self._gotos:
                k = self._skip(at, self._gotos[at], limit=0xFFFFFFFF)
            out.append(struct.pack("=HBBI", op, self._skip(at, yes), self._skip(at, no), k))
        return b"".join(out)

    def _skip(self, at: int, label: str | None, limit: int = 255) -> int:
        if label is None:
            return 0
        if label not in self._labels:
            raise ValueError(f"no label {label!r}")
        skip = self._labels[label] - at - 1
        if not 0 <= skip <= limit:
            raise ValueError(f"jump to {label!r} from {at} skips {skip} instructions")
        return skip
