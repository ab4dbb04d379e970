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

Modes as JSON
-------------
:func:`mode_to_json` / :func:`mode_from_json` are the one JSON form of a mode, used by
``fred route --json`` and by the cocotb cell bench (its runner passes the modes as JSON):

==========  ===============================================  ==============================
kind        mode                                             JSON
==========  ===============================================  ==============================
``R``       ``RMode(sel, reduce)``                           ``{"sel": [s0, s1], "reduce": b}``
``D``       ``DMode(src)``                                   ``{"src": [s0, s1], "broadcast": b}``
``RD``      ``RDMode.X``                                     ``"x"`` (lower-case name)
``DEMUX``   ``DemuxMode(sel)``                               ``{"sel": k}``
``MUX``     ``MuxMode(src)``                                 ``{"src": k}``
==========  ===============================================  ==============================

(``None`` is JSON ``null``; ``broadcast`` is derived from ``src`` and checked on reading.)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple, Optional

__all__ = ["CellAddr", "RMode", "DMode", "RDMode", "DemuxMode", "MuxMode", "STAGES", "KINDS",
           "path_name", "idle_mode", "mode_str", "mode_to_json", "mode_from_json"]

STAGES = ("in", "out", "rd", "demux", "mux")
#: the cell kinds (hdl/netlist/structure.py: stage "in" is an R cell, "out" a D cell, ...)
KINDS = ("R", "D", "RD", "DEMUX", "MUX")


def path_name(path: tuple) -> str:
    """Name of the instance at ``path``: ``top``, or ``mid`` + the copy indices (``mid2.0``)."""
    return "top" if not path else "mid" + ".".join(str(k) for k in path)


class CellAddr(NamedTuple):
    """Address of one cell: the instance path, the stage and the index within the stage."""

    path: tuple
    stage: str
    index: int

    def __str__(self):
        return f"{path_name(self.path)}/{self.stage}{self.index}"


def _check_sel(what: str, value, middle: int):
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < middle:
        raise ValueError(f"{what} {value!r} is out of range: must be 0..{middle - 1} or None "
                         f"(m={middle})")


@dataclass(frozen=True)
class RMode:
    """R-microswitch configuration (2 inputs, m outputs).

    ``sel[i]`` is the output (middle copy) input i goes to, ``None`` when input i is unused.
    With ``reduce`` the two inputs are summed element-wise and the sum leaves on ``sel[0]``;
    ``sel[1]`` must then be ``None``. Without ``reduce`` two used inputs need distinct outputs.
    """

    sel: tuple = (None, None)
    reduce: bool = False

    def validate(self, middle: int) -> "RMode":
        if len(self.sel) != 2:
            raise ValueError(f"R-microswitch sel {self.sel!r} must have 2 entries")
        for i, s in enumerate(self.sel):
            _check_sel(f"R-microswitch sel[{i}]", s, middle)
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

    def validate(self, middle: int) -> "DMode":
        if len(self.src) != 2:
            raise ValueError(f"D-microswitch src {self.src!r} must have 2 entries")
        for j, s in enumerate(self.src):
            _check_sel(f"D-microswitch src[{j}]", s, middle)
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

    def validate(self, middle: int) -> "DemuxMode":
        _check_sel("demux sel", self.sel, middle)
        return self


@dataclass(frozen=True)
class MuxMode:
    """Odd-P last output port: takes middle copy ``src`` (None = unused)."""

    src: Optional[int] = None

    def validate(self, middle: int) -> "MuxMode":
        _check_sel("mux src", self.src, middle)
        return self


# ---------------------------------------------------------------------------------------------
# helpers on modes: idle mode, text, JSON
# ---------------------------------------------------------------------------------------------
def _kind(kind) -> str:
    k = str(kind).upper()
    if k not in KINDS:
        raise ValueError(f"unknown cell kind {kind!r}; known: {', '.join(KINDS)}")
    return k


def idle_mode(kind: str):
    """The mode of an unused cell of ``kind`` (``R``, ``D``, ``RD``, ``DEMUX``, ``MUX``)."""
    return {"R": RMode((None, None)), "D": DMode((None, None)), "RD": RDMode.PASS,
            "DEMUX": DemuxMode(None), "MUX": MuxMode(None)}[_kind(kind)]


def mode_str(mode) -> str:
    """One line for ``fred route``, e.g. ``R reduce in0+in1 -> mid2``."""
    def s(x):
        return "-" if x is None else str(x)
    if isinstance(mode, RMode):
        if mode.reduce:
            return f"R reduce in0+in1 -> mid{s(mode.sel[0])}"
        return f"R in0 -> {'mid' + s(mode.sel[0]) if mode.sel[0] is not None else '-'}, in1 -> {'mid' + s(mode.sel[1]) if mode.sel[1] is not None else '-'}"
    if isinstance(mode, DMode):
        if mode.broadcast:
            return f"D broadcast mid{mode.src[0]} -> out0,out1"
        return f"D out0 <- {'mid' + s(mode.src[0]) if mode.src[0] is not None else '-'}, out1 <- {'mid' + s(mode.src[1]) if mode.src[1] is not None else '-'}"
    if isinstance(mode, RDMode):
        return "RD " + mode.name.lower()
    if isinstance(mode, DemuxMode):
        return f"demux -> {'mid' + str(mode.sel) if mode.sel is not None else '-'}"
    if isinstance(mode, MuxMode):
        return f"mux <- {'mid' + str(mode.src) if mode.src is not None else '-'}"
    return repr(mode)


def mode_to_json(mode):
    """The JSON form of a mode (see the module docstring)."""
    if isinstance(mode, RMode):
        return {"sel": list(mode.sel), "reduce": bool(mode.reduce)}
    if isinstance(mode, DMode):
        return {"src": list(mode.src), "broadcast": mode.broadcast}
    if isinstance(mode, RDMode):
        return mode.name.lower()
    if isinstance(mode, DemuxMode):
        return {"sel": mode.sel}
    if isinstance(mode, MuxMode):
        return {"src": mode.src}
    raise TypeError(f"not a cell mode: {mode!r}")


def mode_from_json(kind: str, obj):
    """Inverse of :func:`mode_to_json` for a cell of ``kind`` (``R``/``r``, ``D``, ``RD``,
    ``DEMUX``, ``MUX``); one-line ``ValueError`` naming a malformed value."""
    k = _kind(kind)
    try:
        if k == "RD":
            return RDMode.parse(obj)
        if k == "R":
            return RMode(tuple(obj["sel"]), bool(obj["reduce"]))
        if k == "D":
            mode = DMode(tuple(obj["src"]))
            if "broadcast" in obj and bool(obj["broadcast"]) != mode.broadcast:
                raise ValueError(f"D-microswitch mode {obj!r}: broadcast does not match src")
            return mode
        if k == "DEMUX":
            return DemuxMode(obj["sel"])
        return MuxMode(obj["src"])
    except (KeyError, TypeError):
        raise ValueError(f"{k} cell mode {obj!r} is not valid JSON for that kind "
                         f"(see fred.hdl.netlist.modes.mode_to_json)") from None
