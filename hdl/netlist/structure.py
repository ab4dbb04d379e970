"""The recursive structure of FRED_m(P), flattened: instances, cells, pins and wires.

Pure Python (no Amaranth). This is the structure hdl/netlist/modes.py states, made explicit so that the
routing compiler, the structural golden model (sim/golden/fabric.py) and the RTL generator all
walk the *same* graph:

* an *instance* of FRED_m(P) is named by its ``path`` (tuple of middle-copy indices, ``()`` =
  top); :func:`instance_ports` gives its port count;
* its cells are ``CellAddr(path, stage, index)`` with stage ``"rd"`` (P == 2), or ``"in"`` /
  ``"out"`` (R / D cells, r = P // 2 of each) plus ``"demux"`` / ``"mux"`` (odd P);
* a :class:`Pin` is one port of one cell (``Pin(cell, "in"|"out", i)``) or, with ``cell=None``,
  a fabric port of the top instance (``Pin(None, "in", p)`` is fabric input p -- a *source*;
  ``Pin(None, "out", p)`` is fabric output p -- a *sink*);
* :attr:`Netlist.driver` maps every sink pin (each cell input and each fabric output) to the
  source pin (a cell output or a fabric input) that drives it. Instance ports are pure wiring and
  disappear in the flattening.

Pin counts: R cell 2 in / m out; D cell m in / 2 out; RD cell 2 / 2; demux 1 / m; mux m / 1.

Stages (pipeline columns): an instance at depth d puts its R cells and demux in column d, its D
cells and mux in column S-1-d, and an RD cell (depth D = S//2) in the middle column, where
S = :func:`stages` (P): S(2) = 1, S(P) = 2 + S(ceil(P/2)). All instances at one depth have the
same port count, so every input -> output path crosses exactly S cells (the demux/mux of odd P
count as one stage each; the RTL pads them to a cell's latency). FRED_2(2^k) is the Benes
network with 2k - 1 stages.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple, Optional

from .modes import CellAddr
from fred.hdl.params import check_middle, check_ports

__all__ = [
    "MAX_PORTS", "MAX_CELLS", "Pin", "Netlist", "check_params", "instance_ports", "stages",
    "depth", "cell_counts", "total_cells", "instance_count", "netlist", "CELL_KINDS",
]

#: largest P accepted: the recursion, the config vector and the routing search all grow with P;
#: beyond a 1024-port switch nothing in this project is meaningful and builds take minutes.
MAX_PORTS = 1024
#: largest flattened fabric (cells) built: above this, building, routing and simulating the
#: flattened structure in Python no longer takes "reasonable time" (seconds).
MAX_CELLS = 200_000

#: stage name -> cell kind
CELL_KINDS = {"in": "R", "out": "D", "rd": "RD", "demux": "DEMUX", "mux": "MUX"}


def check_params(P: int, middle: int, build: bool = True) -> None:
    """Validate P (ports, <= :data:`MAX_PORTS`) and the middle subnetworks with
    :mod:`fred.hdl.params` (``TypeError`` / one-line ``ValueError`` naming the value).

    With ``build`` also refuse fabrics whose flattened structure exceeds :data:`MAX_CELLS`.
    """
    check_ports(P, MAX_PORTS, "the recursive fabric and its routing search grow too big to "
                              "build in reasonable time")
    check_middle(middle)
    if build:
        n = total_cells(P, middle)
        if n > MAX_CELLS:
            raise ValueError(f"FRED_{middle}({P}) has {n:,} cells, more than the {MAX_CELLS:,} this "
                             f"tool builds in reasonable time; use fewer ports or middle copies")


def child_ports(P: int) -> int:
    """Port count of the middle copies of FRED_m(P) (P >= 3): ceil(P / 2)."""
    return (P + 1) // 2


def depth(P: int) -> int:
    """Recursion depth of FRED_m(P): 0 for P == 2, else 1 + depth(ceil(P/2))."""
    d = 0
    while P > 2:
        P = child_ports(P)
        d += 1
    return d


def stages(P: int) -> int:
    """Cells on every input -> output path: S(2) = 1, S(P) = 2 + S(ceil(P/2))."""
    return 2 * depth(P) + 1


def instance_ports(P: int, path: tuple) -> int:
    """Port count of the instance at ``path`` inside FRED_m(P)."""
    for _ in path:
        if P == 2:
            raise ValueError(f"path {path!r} goes below the FRED_m(2) base case")
        P = child_ports(P)
    return P


@lru_cache(maxsize=None)
def cell_counts(P: int, middle: int) -> dict:
    """Cells per kind in FRED_m(P): ``{"R": .., "D": .., "RD": .., "DEMUX": .., "MUX": ..}``."""
    if P == 2:
        return {"R": 0, "D": 0, "RD": 1, "DEMUX": 0, "MUX": 0}
    r, odd = P // 2, P % 2
    sub = cell_counts(child_ports(P), middle)
    out = {k: middle * v for k, v in sub.items()}
    out["R"] += r
    out["D"] += r
    out["DEMUX"] += odd
    out["MUX"] += odd
    return out


def total_cells(P: int, middle: int) -> int:
    return sum(cell_counts(P, middle).values())


def instance_count(P: int, middle: int) -> int:
    """Number of FRED instances (including the top) in FRED_m(P)."""
    return sum(middle ** d for d in range(depth(P) + 1))


class Pin(NamedTuple):
    """One port of one cell, or (``cell is None``) a fabric port of the top instance."""

    cell: Optional[CellAddr]
    dir: str        # "in" | "out"
    index: int

    def __str__(self):
        if self.cell is None:
            return f"port.{self.dir}{self.index}"
        return f"{self.cell}.{self.dir}{self.index}"


class Netlist:
    """The flattened FRED_m(P): every cell and every wire (the RTL is :class:`fred.hdl.fabric.recursive.Fabric`).

    Attributes
    ----------
    P, middle, depth, n_stages
    instances : dict path -> port count (every instance, top first, depth-first order)
    cells : list of CellAddr in pipeline order (by column; deterministic within a column)
    kind : dict CellAddr -> "R" | "D" | "RD" | "DEMUX" | "MUX"
    column : dict CellAddr -> pipeline column 0..n_stages-1
    n_in, n_out : dict CellAddr -> pin counts
    driver : dict sink Pin -> source Pin (every cell input pin and every fabric output port)
    """

    def __init__(self, P: int, middle: int):
        check_params(P, middle)
        self.P, self.middle = P, middle
        self.depth = depth(P)
        self.n_stages = 2 * self.depth + 1
        self.instances = {}
        self.kind = {}
        self.column = {}
        self.n_in = {}
        self.n_out = {}
        self.driver = {}
        self._build((), P, 0)
        for p in range(P):
            self.driver[self.instance_input_sink((), p)] = Pin(None, "in", p)
            self.driver[Pin(None, "out", p)] = self.instance_output_source((), p)
        order = {s: i for i, s in enumerate(("in", "demux", "rd", "out", "mux"))}
        self.cells = sorted(self.kind, key=lambda c: (self.column[c], c.path, order[c.stage], c.index))
        self.counts = dict(cell_counts(P, middle))

    # -- construction --------------------------------------------------------------------------
    def _add(self, cell, col, n_in, n_out):
        self.kind[cell] = CELL_KINDS[cell.stage]
        self.column[cell] = col
        self.n_in[cell] = n_in
        self.n_out[cell] = n_out

    def _build(self, path, P, d):
        self.instances[path] = P
        m = self.middle
        if P == 2:
            self._add(CellAddr(path, "rd", 0), d, 2, 2)
            return
        r, odd = P // 2, P % 2
        last = self.n_stages - 1 - d
        for j in range(r):
            self._add(CellAddr(path, "in", j), d, 2, m)
            self._add(CellAddr(path, "out", j), last, m, 2)
        if odd:
            self._add(CellAddr(path, "demux", 0), d, 1, m)
            self._add(CellAddr(path, "mux", 0), last, m, 1)
        for k in range(m):
            self._build(path + (k,), (P + 1) // 2, d + 1)
        # inputs of middle copies are instance-port wiring: resolve to the cell input pins
        for k in range(m):
            cp = path + (k,)
            for j in range(r + odd):
                src = Pin(CellAddr(path, "in", j), "out", k) if j < r else Pin(CellAddr(path, "demux", 0), "out", k)
                self.driver[self.instance_input_sink(cp, j)] = src
        for j in range(r):
            for k in range(m):
                self.driver[Pin(CellAddr(path, "out", j), "in", k)] = self.instance_output_source(path + (k,), j)
        if odd:
            for k in range(m):
                self.driver[Pin(CellAddr(path, "mux", 0), "in", k)] = self.instance_output_source(path + (k,), r)

    # -- instance port resolution -------------------------------------------------------------
    def instance_input_sink(self, path, port) -> Pin:
        """The cell input pin that input ``port`` of the instance at ``path`` feeds."""
        P = self.instances[path]
        if not 0 <= port < P:
            raise ValueError(f"port {port} out of range for instance {path!r} with {P} ports")
        if P == 2:
            return Pin(CellAddr(path, "rd", 0), "in", port)
        if port < 2 * (P // 2):
            return Pin(CellAddr(path, "in", port // 2), "in", port % 2)
        return Pin(CellAddr(path, "demux", 0), "in", 0)

    def instance_output_source(self, path, port) -> Pin:
        """The cell output pin that drives output ``port`` of the instance at ``path``."""
        P = self.instances[path]
        if not 0 <= port < P:
            raise ValueError(f"port {port} out of range for instance {path!r} with {P} ports")
        if P == 2:
            return Pin(CellAddr(path, "rd", 0), "out", port)
        if port < 2 * (P // 2):
            return Pin(CellAddr(path, "out", port // 2), "out", port % 2)
        return Pin(CellAddr(path, "mux", 0), "out", 0)

    # -- queries -------------------------------------------------------------------------------
    def cells_of(self, path) -> list:
        """Cells that belong directly to the instance at ``path`` (not to its middle copies)."""
        by_path = self.__dict__.get("_cells_by_path")
        if by_path is None:  # one pass over the cells (a scan per instance is quadratic in P)
            by_path = self.__dict__["_cells_by_path"] = {}
            for c in self.cells:
                by_path.setdefault(c.path, []).append(c)
        return list(by_path.get(path, ()))

    def sinks(self):
        """source Pin -> list of sink Pins it drives (each source drives exactly one sink)."""
        out = {}
        for snk, src in self.driver.items():
            out.setdefault(src, []).append(snk)
        return out

    def summary(self) -> str:
        c = self.counts
        return (f"FRED_{self.middle}({self.P}): {self.n_stages} stages, {len(self.instances)} instances, "
                f"{c['R']} R + {c['D']} D + {c['RD']} RD + {c['DEMUX']} demux + {c['MUX']} mux "
                f"= {sum(c.values())} cells")


@lru_cache(maxsize=32)
def netlist(P: int, middle: int) -> Netlist:
    """Cached :class:`Netlist` (treat as read-only)."""
    return Netlist(P, middle)
