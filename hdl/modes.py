"""Cell modes and cell addresses: the contract between routing compiler, RTL and golden models.

Pure Python, no Amaranth import: the routing compiler, the golden models and the RTL generators
all speak this vocabulary.

Structure of FRED_m(P) and cell addresses
-----------------------------------------
An *instance* of FRED_m(P) is named by its ``path``: the tuple of middle-copy indices taken from
the top (``()`` is the whole fabric, ``(2,)`` its middle copy 2, ``(2, 0)`` copy 0 inside that).
Inside an instance with P ports:

* P == 2: a single RD-microswitch ``CellAddr(path, "rd", 0)``; ports 0/1 are its in0/in1 and
  out0/out1.
* P == 2r or 2r+1 (P >= 3): r R-microswitches ``CellAddr(path, "in", j)`` and r D-microswitches
  ``CellAddr(path, "out", j)``, j = 0..r-1, and m middle copies at paths ``path + (k,)`` with
  r ports (even P) or r+1 ports (odd P).

  - fabric input port 2j+i (i in {0,1}) is input i of R cell j; output k of R cell j drives input
    port j of middle copy k;
  - output port j of middle copy k drives input k of D cell j; output i of D cell j is fabric
    output port 2j+i;
  - odd P only: input port 2r enters ``CellAddr(path, "demux", 0)``, a 1 -> m demultiplexer whose
    output k drives input port r of middle copy k; output port r of middle copy k is input k of
    ``CellAddr(path, "mux", 0)``, an m -> 1 multiplexer that drives fabric output port 2r.

Reductions add in0 + in1 of a cell (operand order matters only for NaN payloads, which are
canonicalized, so a reduction tree is fixed by *which* cells add, level by level).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple, Optional

__all__ = ["CellAddr", "RMode", "DMode", "RDMode", "DemuxMode", "MuxMode", "STAGES"]

STAGES = ("in", "out", "rd", "demux", "mux")


class CellAddr(NamedTuple):
    """Address of one cell: the instance path, the stage and the index within the stage."""

    path: tuple
    stage: str
    index: int

    def __str__(self):
        where = "top" if not self.path else "mid" + ".".join(str(k) for k in self.path)
        return f"{where}/{self.stage}{self.index}"


def _check_sel(what: str, value, m: int):
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < m:
        raise ValueError(f"{what} {value!r} is out of range: must be 0..{m - 1} or None (m={m})")


@dataclass(frozen=True)
class RMode:
    """R-microswitch configuration (2 inputs, m outputs).

    ``sel[i]`` is the output (middle copy) input i goes to, ``None`` when input i is unused.
    With ``reduce`` the two inputs are summed element-wise and the sum leaves on ``sel[0]``;
    ``sel[1]`` must then be ``None``. Without ``reduce`` two used inputs need distinct outputs.
    """

    sel: tuple = (None, None)
    reduce: bool = False

    def validate(self, m: int) -> "RMode":
        if len(self.sel) != 2:
            raise ValueError(f"R-microswitch sel {self.sel!r} must have 2 entries")
        for i, s in enumerate(self.sel):
            _check_sel(f"R-microswitch sel[{i}]", s, m)
        if self.reduce:
            if self.sel[0] is None or self.sel[1] is not None:
                raise ValueError(f"R-microswitch reduce needs sel[0] set and sel[1] None, got {self.sel!r}")
        elif self.sel[0] is not None and self.sel[0] == self.sel[1]:
            raise ValueError(f"R-microswitch without reduce sends both inputs to output {self.sel[0]}")
        return self


@dataclass(frozen=True)
class DMode:
    """D-microswitch configuration (m inputs, 2 outputs).

    ``src[j]`` is the input (middle copy) output j takes, ``None`` when output j is unused.
    ``src[0] == src[1]`` (not None) is broadcast: one input copied to both outputs.
    """

    src: tuple = (None, None)

    @property
    def broadcast(self) -> bool:
        return self.src[0] is not None and self.src[0] == self.src[1]

    def validate(self, m: int) -> "DMode":
        if len(self.src) != 2:
            raise ValueError(f"D-microswitch src {self.src!r} must have 2 entries")
        for j, s in enumerate(self.src):
            _check_sel(f"D-microswitch src[{j}]", s, m)
        return self


class RDMode(enum.Enum):
    """RD-microswitch (2x2) modes. Values are the RTL encoding."""

    PASS = 0       # in0 -> out0, in1 -> out1
    CROSS = 1      # in0 -> out1, in1 -> out0
    BCAST0 = 2     # in0 -> out0 and out1
    BCAST1 = 3     # in1 -> out0 and out1
    SUM0 = 4       # in0 + in1 -> out0
    SUM1 = 5       # in0 + in1 -> out1
    SUM_BOTH = 6   # in0 + in1 -> out0 and out1

    @property
    def reduces(self) -> bool:
        return self in (RDMode.SUM0, RDMode.SUM1, RDMode.SUM_BOTH)

    @property
    def broadcasts(self) -> bool:
        return self in (RDMode.BCAST0, RDMode.BCAST1, RDMode.SUM_BOTH)

    @classmethod
    def parse(cls, name) -> "RDMode":
        if isinstance(name, RDMode):
            return name
        try:
            return cls[str(name).upper().replace("-", "_")]
        except KeyError:
            raise ValueError(f"unknown RD-microswitch mode {name!r}; known: "
                             + ", ".join(m.name.lower() for m in cls)) from None


@dataclass(frozen=True)
class DemuxMode:
    """Odd-P last input port: goes to middle copy ``sel`` (None = unused)."""

    sel: Optional[int] = None

    def validate(self, m: int) -> "DemuxMode":
        _check_sel("demux sel", self.sel, m)
        return self


@dataclass(frozen=True)
class MuxMode:
    """Odd-P last output port: takes middle copy ``src`` (None = unused)."""

    src: Optional[int] = None

    def validate(self, m: int) -> "MuxMode":
        _check_sel("mux src", self.src, m)
        return self
