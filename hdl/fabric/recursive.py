"""FRED_m(P) fabric RTL: the recursive reduce/distribute Clos, built from the microswitch cells.

Structure (exactly hdl/netlist/modes.py / hdl/netlist/structure.py)
---------------------------------------------------
``Fabric(ports=P, middle=m, lanes, dtype)`` is a :class:`wiring.Component` built recursively:

* P == 2: one :class:`~fred.hdl.cells.microswitches.RDCell` (submodule ``rd``);
* P == 2r or 2r+1 (P >= 3): r :class:`~fred.hdl.cells.microswitches.RCell` s ``in0..in{r-1}``, r
  :class:`~fred.hdl.cells.microswitches.DCell` s ``out0..out{r-1}`` and m middle copies ``mid0..mid{m-1}``,
  each a ``Fabric`` with ceil(P/2) ports. Input port 2j+i is input i of R cell j, output k of R
  cell j drives port j of middle copy k; port j of middle copy k drives input k of D cell j,
  whose output i is fabric output 2j+i;
* odd P: the last input (2r) enters :class:`~fred.hdl.cells.muxes.DemuxCell` ``demux`` (1 -> m),
  whose output k drives port r of middle copy k; port r of middle copy k is input k of
  :class:`~fred.hdl.cells.muxes.MuxCell` ``mux`` (m -> 1), which drives the last output.

Ports: ``i: In(S).array(P)``, ``o: Out(S).array(P)``, ``cfg: In(config_width)`` with
``S = stream.Signature(data.ArrayLayout(width, lanes))`` (lane 0 in the low bits).

Latency
-------
The demux has the latency of an R cell and the mux that of a D cell, so every input -> output
path crosses one cell per pipeline column: ``depth(P)`` R/demux columns, one RD column and
``depth(P)`` D/mux columns, i.e. ``stages(P) = 2 depth(P) + 1`` cells, and

    latency = depth(P) * (R latency + D latency) + RD latency   (= stages(P) x cell latency
                                                                   when the cells agree)

cycles from a beat's acceptance on an input to its presentation on an output (no back-pressure).
Every path is fully pipelined (one beat per cycle per port in every mode).

Latency under idle sources (issue 13). The formula is exact for unicast and multicast flows
whatever the sources do, and for every flow while the sources are continuous. With gaps in the
sources, a beat of a *reducing* flow can leave later: a join (an R or RD cell adding two beats)
waits for the later operand, the pipelines feeding the earlier one freeze behind their full skid
registers, and a frozen pipeline keeps its bubbles (the cells do not compact them,
hdl/cells/microswitches.py). The freeze backs up through every cell of the operand's branch,
joining or not (an R cell passing one input, the demux of odd P), so an operand can sit behind
bubbles in all the R-column stages between its source and its join: at most depth(P) columns of
L stages, L the R cells' latency (the demux's too), less the stage the beat itself holds. The D
side (D cells, mux) never freezes while the sinks are ready. A beat therefore leaves between
``latency`` and :func:`gapped_latency_bound` ``= latency + depth(P) x L - 1`` cycles after the last
of its inputs was accepted; for int32 (L = 1) that is ``depth(P) - 1``. The earlier bound,
``latency + max(depth(P) x (L - 1), depth(P) - 1)``, charged L - 1 per join level after the first
(only the cell just before a join frozen, the first join level free); make regress-fabric caught
beats at +5 on FRED_3(8) bf16 and FRED_3(7) fp32, and a reduce of two inputs that meet only at
the RD cell (FRED_2(8) fp16, ``1,7>7``: no join before it) takes up to +4, where that derivation
said +0. The bound is a measured contract, not a proof: the compiled soaks with idle sources
reach it at depth 1, 2 and 3 (FRED_3(4) +2, FRED_2(8) and FRED_3(7) +5, FRED_2(12) +8, int32
FRED_3(12) +2; the sweep in docs/fabric.md), checked by tests/sim/test_fabric_sim.py. No beat is
lost, added or reordered, and throughput is unaffected.

Configuration vector
--------------------
``cfg`` is the concatenation of every cell's own configuration word (each cell's
``encode()`` bits), in *depth-first* order of the recursion: for an instance at ``path``

    in0 .. in{r-1}, demux (odd P), out0 .. out{r-1}, mux (odd P), then middle copy 0 (recursively),
    ..., middle copy m-1;   or the single rd cell when P == 2,

the first cell in the least significant bits. So every instance's configuration is one
contiguous slice of the vector. :func:`config_layout` lists ``(CellAddr, offset, width)``;
:func:`config_bits` builds the vector from a :class:`fred.hdl.routing.compiler.RoutingResult` (cells it
does not mention get their idle mode). Widths: R ``RCell.config_layout(m)``, D
``DCell.config_layout(m)``, RD 3 bits (the :class:`~fred.hdl.netlist.modes.RDMode` value), demux and mux
``m.bit_length()`` bits (0 = idle, k + 1 = middle copy k; see :class:`~fred.hdl.cells.muxes.DemuxCell`).
The configuration may only change while the fabric is drained (no beat inside).
"""

from __future__ import annotations

from functools import lru_cache, partial

from amaranth.hdl import Module, Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fred.hdl.cells import FAULTS, DCell, RCell, RDCell, stream_signature
from fred.hdl.dtypes import get_dtype
from .hier import FORMS, LaneAdders, emit_modules, resolve_form, instantiate, plain_signature
from fred.hdl.netlist import CellAddr, DemuxMode, DMode, MuxMode, RDMode, RMode
from fred.hdl.cells import DemuxCell, MuxCell, sel_width
from fred.hdl.params import check_lanes, check_ports, rejecting
from fred.hdl.netlist import check_params, child_ports, depth, stages, total_cells

__all__ = ["Fabric", "config_layout", "config_width", "config_bits", "fabric_latency",
           "check_fabric_params", "MAX_RTL_PORTS", "MAX_RTL_WORK", "verilog_build", "RD_CONFIG_WIDTH",
           "fabric_verilog_text", "decode_config", "cell_latencies", "gapped_latency_bound",
           "MAX_MODULE_PORT_BITS", "module_port_bits"]

#: largest fabric generated as RTL (ports)
MAX_RTL_PORTS = 64
#: largest generated fabric in "lane-element slices" (cells x lanes x element width / 16).
#: Generation (Amaranth elaboration + Yosys) grows linearly, about 75 ms of CPU per slice
#: (FRED_3(12) with 4 fp16 lanes: 93 cells, 372 slices, ~30 s); the budget is ~5 CPU minutes.
#: FRED_3(64) fits with 1 to 3 fp16 lanes, not with 4.
MAX_RTL_WORK = 4_000
#: the hierarchical form's bound: Amaranth's netlist numbers the bits of one cell (a module's
#: input ports, an instance's outputs) in 16 bits (amaranth.hdl._nir.Net), so no module may
#: take more input bits than this. Generation time is then ~10 CPU s for FRED_3(12) at 256 fp16
#: lanes (FRED_3(12) fits up to 338 fp16 lanes, FRED_3(64) up to 57).
MAX_MODULE_PORT_BITS = (1 << 16) - 1


def module_port_bits(ports: int, middle: int, lanes: int, dtype) -> int:
    """Input bits of the widest module of FRED_m(P) (its top: payload + valid per input,
    ready per output, the config vector; or a cell with ``middle`` streams)."""
    w = lanes * get_dtype(dtype).width
    return max(ports, middle) * (w + 2) + config_width(ports, middle)


#: width of the RD cell's configuration (an RDMode value)
RD_CONFIG_WIDTH = 3


def check_fabric_params(ports, middle, lanes=1, dtype="fp16", form="shared") -> None:
    """Validate RTL parameters (:mod:`fred.hdl.params`): ``TypeError`` / one-line
    ``ValueError`` naming the bad value. The flat and shared forms are limited by their lane
    slices (:data:`MAX_RTL_WORK`); the hierarchical form by the port bits of one module
    (:data:`MAX_MODULE_PORT_BITS`)."""
    check_params(ports, middle, build=False)
    check_lanes(lanes)
    t = get_dtype(dtype)
    check_ports(ports, MAX_RTL_PORTS, "RTL generation of a larger FRED_m(P) takes too long")
    if form == "hier":
        bits = module_port_bits(ports, middle, lanes, t)
        if bits > MAX_MODULE_PORT_BITS:
            raise ValueError(f"FRED_{middle}({ports}) with {lanes} {t.name} lanes needs {bits:,} input "
                             f"bits in one module, more than the {MAX_MODULE_PORT_BITS:,} Amaranth's "
                             f"netlist holds; use fewer ports, middle copies or lanes")
        return
    n = total_cells(ports, middle)
    work = n * lanes * t.width // 16
    if work > MAX_RTL_WORK:
        raise ValueError(f"FRED_{middle}({ports}) with {lanes} {t.name} lanes is too large to generate "
                         f"in reasonable time ({n} cells x {lanes} lanes = {work:,} lane slices, "
                         f"limit {MAX_RTL_WORK:,}); use fewer ports, middle copies or lanes, or --form hier")


# ---------------------------------------------------------------------------------------------
# configuration layout (pure Python; needs only the cells' class-level layouts)
# ---------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _widths(m: int) -> dict:
    return {"in": Shape.cast(RCell.config_layout(m)).width,
            "out": Shape.cast(DCell.config_layout(m)).width,
            "rd": RD_CONFIG_WIDTH,
            "demux": sel_width(m), "mux": sel_width(m)}


def _instance_order(path, P, m):
    """Cells of the instance at ``path`` and its middle copies, depth-first (the config order)."""
    if P == 2:
        yield CellAddr(path, "rd", 0)
        return
    r, odd = P // 2, P % 2
    for j in range(r):
        yield CellAddr(path, "in", j)
    if odd:
        yield CellAddr(path, "demux", 0)
    for j in range(r):
        yield CellAddr(path, "out", j)
    if odd:
        yield CellAddr(path, "mux", 0)
    for k in range(m):
        yield from _instance_order(path + (k,), child_ports(P), m)


@lru_cache(maxsize=64)
def _layout(ports: int, middle: int) -> tuple:
    w = _widths(middle)
    out, off = [], 0
    for c in _instance_order((), ports, middle):
        out.append((c, off, w[c.stage]))
        off += w[c.stage]
    return tuple(out)


def config_layout(ports: int, middle: int) -> list:
    """``[(CellAddr, offset, width), ...]`` of the flat config vector, depth-first order."""
    check_params(ports, middle, build=False)
    return list(_layout(ports, middle))


def config_width(ports: int, middle: int) -> int:
    lay = config_layout(ports, middle)
    c, off, w = lay[-1]
    return off + w


def _encode(cell: CellAddr, mode, m: int) -> int:
    st = cell.stage
    if st == "in":
        mode = RMode() if mode is None else mode
        if not isinstance(mode, RMode):
            raise ValueError(f"cell {cell}: mode {mode!r} is not an RMode")
        return RCell.encode(mode, m)
    if st == "out":
        mode = DMode() if mode is None else mode
        if not isinstance(mode, DMode):
            raise ValueError(f"cell {cell}: mode {mode!r} is not a DMode")
        return DCell.encode(mode, m)
    if st == "rd":
        mode = RDMode.PASS if mode is None else RDMode.parse(mode)
        return mode.value
    if st == "demux":
        if mode is not None and not isinstance(mode, DemuxMode):
            raise ValueError(f"cell {cell}: mode {mode!r} is not a DemuxMode")
        return DemuxCell.encode(mode, m)
    if mode is not None and not isinstance(mode, MuxMode):
        raise ValueError(f"cell {cell}: mode {mode!r} is not a MuxMode")
    return MuxCell.encode(mode, m)


def config_bits(ports: int, middle: int, routing_result=None, cell_modes=None) -> int:
    """The flat config vector (an int) for ``routing_result`` (a RoutingResult, or pass a
    ``cell_modes`` dict). Cells without a mode get their idle mode; ``None`` gives all idle."""
    if routing_result is not None:
        if (routing_result.P, routing_result.middle) != (ports, middle):
            raise ValueError(f"routing is for FRED_{routing_result.middle}({routing_result.P}), "
                             f"not FRED_{middle}({ports})")
        cell_modes = routing_result.cell_modes
    cell_modes = cell_modes or {}
    lay = config_layout(ports, middle)
    known = {c for c, _, _ in lay}
    stray = [c for c in cell_modes if c not in known]
    if stray:
        raise ValueError(f"cell {stray[0]} is not a cell of FRED_{middle}({ports})")
    word = 0
    for c, off, w in lay:
        v = _encode(c, cell_modes.get(c), middle)
        if not 0 <= v < (1 << w):
            raise ValueError(f"cell {c}: encoded config {v} does not fit {w} bits")
        word |= v << off
    return word


def decode_config(ports: int, middle: int, word: int) -> dict:
    """CellAddr -> raw config field value of the flat vector ``word`` (for debugging)."""
    return {c: (word >> off) & ((1 << w) - 1) for c, off, w in config_layout(ports, middle)}


def cell_latencies(middle: int, lanes: int, dtype) -> dict:
    """``{"R": .., "D": .., "RD": ..}`` latency in cycles of the cells for these parameters."""
    return dict(_cell_latencies(middle, lanes, get_dtype(dtype).name))


@lru_cache(maxsize=None)
def _cell_latencies(middle, lanes, dtype):
    # hdl/cells/microswitches.py: every cell kind has latency cell_latency(dtype) in every mode
    return (("R", RCell.cell_latency(dtype)), ("D", DCell.cell_latency(dtype)),
            ("RD", RDCell.cell_latency(dtype)))


def gapped_latency_bound(ports: int, middle: int, lanes: int = 1, dtype="fp16") -> int:
    """Most cycles a beat of a reducing flow takes through FRED_m(P) when the sources have gaps
    (no back-pressure): ``fabric_latency + depth(P) x L - 1``, L the latency of the R-column
    cells (R, demux), whose depth(P) x L stages an operand can wait behind as frozen bubbles; see
    "Latency under idle sources" in the module docstring. FRED_m(2), one RD cell fed by the
    sources (depth 0), has no R column: the formula exactly."""
    lat = cell_latencies(middle, lanes, dtype)
    return fabric_latency(ports, middle, lanes, dtype) + max(depth(ports) * lat["R"] - 1, 0)


def fabric_latency(ports: int, middle: int, lanes: int = 1, dtype="fp16") -> int:
    """Cycles through FRED_m(P): depth(P) x (R + D latency) + RD latency."""
    check_params(ports, middle, build=False)
    lat = cell_latencies(middle, lanes, dtype)
    return depth(ports) * (lat["R"] + lat["D"]) + lat["RD"]


# ---------------------------------------------------------------------------------------------
# the fabric
# ---------------------------------------------------------------------------------------------
# shared cell modules (fast Verilog): every cell as an instance of one module per cell kind
# ---------------------------------------------------------------------------------------------
def _cell_module_name(cell) -> str:
    if isinstance(cell, (DemuxCell, MuxCell)):
        kind = "demux" if isinstance(cell, DemuxCell) else "mux"
        return f"fred_{kind}_m{cell.middle}_l{cell.lanes}_{cell.dtype.name}_lat{cell.latency}"
    name = cell.verilog_name
    return name + (f"_{cell.fault.replace('-', '_')}" if getattr(cell, "fault", None) else "")


def _cell_instance(mod, name, cell, registry, hier=False):
    """Add an ``Instance`` of the shared module for ``cell`` to ``mod`` as submodule ``name``;
    return an interface with the cell's signature wired to the instance's ports (plain payloads
    and lane-adder instances in the hierarchical form, :mod:`fred.hdl.fabric.hier`)."""
    if not hier:
        return instantiate(mod, name, cell, _cell_module_name(cell), registry)
    cell.adder_class = partial(LaneAdders, registry=registry)
    return instantiate(mod, name, cell, _cell_module_name(cell), registry,
                       plain_signature(cell.signature))


def _fabric_module_name(fab) -> str:
    fault = f"_{fab.fault.replace('-', '_')}" if fab.fault else ""
    return f"fred_fabric_m{fab.middle}_p{fab.ports}_l{fab.lanes}_{fab.dtype.name}{fault}"


# ---------------------------------------------------------------------------------------------
class Fabric(wiring.Component):
    """FRED_m(P) (see the module docstring). Attributes: ``ports``, ``middle``, ``lanes``,
    ``dtype``, ``config_width``, ``latency`` (cycles), ``stages`` (cells per path).

    ``fault`` (tests only) builds every cell with that fault (see ``fred.hdl.cells.microswitches.FAULTS``)."""

    def __init__(self, ports: int, middle: int, lanes: int, dtype, *, fault=None, _path=(),
                 _checked=False, _shared=None, _hier=False):
        if not _checked:
            with rejecting(self):
                form = "hier" if _hier and _shared is not None else "shared"
                check_fabric_params(ports, middle, lanes, dtype, form)
                if fault not in FAULTS:
                    raise ValueError(f"unknown fault {fault!r}; known: "
                                     + ", ".join(f for f in FAULTS if f))
        self.fault = fault
        self._shared = _shared  # None, or a dict module name -> cell (see fabric_verilog_text)
        self._hier = bool(_hier) and _shared is not None  # hierarchical form (fred.hdl.fabric.hier)
        ports, middle, lanes = int(ports), int(middle), int(lanes)  # checked: ints (numpy ones too)
        self.ports, self.middle, self.lanes = ports, middle, lanes
        self.dtype = get_dtype(dtype)
        self.path = tuple(_path)
        self.stages = stages(ports)
        self.latency = fabric_latency(ports, middle, lanes, self.dtype)
        self._layout = _layout(ports, middle)
        #: for sim/formal/fabric.py: submodule name (in0, out1, rd, mid0, ...) -> cell or middle
        #: copy, filled by elaborate()
        self.probes = {}
        c, off, w = self._layout[-1]
        self.config_width = off + w
        S = stream_signature(lanes, self.dtype)
        sig = wiring.Signature({"i": In(S).array(ports), "o": Out(S).array(ports),
                                "cfg": In(self.config_width)})
        super().__init__(plain_signature(sig) if self._hier else sig)

    def config_layout(self) -> list:
        """``[(CellAddr, offset, width), ...]``; addresses relative to this instance."""
        return list(self._layout)

    def config_bits(self, routing_result=None, cell_modes=None) -> int:
        return config_bits(self.ports, self.middle, routing_result, cell_modes)

    def _cell(self, mod, name, cell):
        self.probes[name] = cell
        if self._shared is None:
            mod.submodules[name] = cell
            return cell
        return _cell_instance(mod, name, cell, self._shared, self._hier)

    def _middle(self, mod, k, sub):
        """Middle copy ``k``: a submodule, or an instance of its size's module (hier form)."""
        self.probes[f"mid{k}"] = sub
        if not self._hier:
            mod.submodules[f"mid{k}"] = sub
            return sub
        intf = instantiate(mod, f"mid{k}", sub, _fabric_module_name(sub), self._shared)
        intf.config_width = sub.config_width
        return intf

    def elaborate(self, platform):
        mod = Module()
        P, m, L, t = self.ports, self.middle, self.lanes, self.dtype
        offsets = {cell: (off, w) for cell, off, w in self._layout}

        def cfg(cell, sig):
            off, w = offsets[cell]
            mod.d.comb += sig.eq(self.cfg[off:off + w])

        if P == 2:
            rd = self._cell(mod, "rd", RDCell(L, t.name, fault=self.fault))
            cfg(CellAddr((), "rd", 0), rd.cfg)
            for p in range(2):
                wiring.connect(mod, wiring.flipped(self.i[p]), rd.i[p])
                wiring.connect(mod, rd.o[p], wiring.flipped(self.o[p]))
            return mod

        r, odd = P // 2, P % 2
        Pc = child_ports(P)
        lat = cell_latencies(m, L, t)
        rin, dout, mids = [], [], []
        for j in range(r):
            rc = self._cell(mod, f"in{j}", RCell(m, L, t.name, fault=self.fault))
            cfg(CellAddr((), "in", j), rc.cfg)
            rin.append(rc)
            dc = self._cell(mod, f"out{j}", DCell(m, L, t.name, fault=self.fault))
            cfg(CellAddr((), "out", j), dc.cfg)
            dout.append(dc)
        for k in range(m):
            sub = self._middle(mod, k, Fabric(Pc, m, L, t, fault=self.fault, _path=self.path + (k,),
                                              _checked=True, _shared=self._shared, _hier=self._hier))
            # the child's config is the contiguous slice starting at its first cell
            first = next(cell for cell, _, _ in self._layout if cell.path[:1] == (k,))
            off = offsets[first][0]
            mod.d.comb += sub.cfg.eq(self.cfg[off:off + sub.config_width])
            mids.append(sub)
        for j in range(r):
            for i in range(2):
                wiring.connect(mod, wiring.flipped(self.i[2 * j + i]), rin[j].i[i])
                wiring.connect(mod, dout[j].o[i], wiring.flipped(self.o[2 * j + i]))
            for k in range(m):
                wiring.connect(mod, rin[j].o[k], mids[k].i[j])
                wiring.connect(mod, mids[k].o[j], dout[j].i[k])
        if odd:
            dm = self._cell(mod, "demux", DemuxCell(m, L, t, lat["R"]))
            mx = self._cell(mod, "mux", MuxCell(m, L, t, lat["D"]))
            cfg(CellAddr((), "demux", 0), dm.cfg)
            cfg(CellAddr((), "mux", 0), mx.cfg)
            wiring.connect(mod, wiring.flipped(self.i[2 * r]), dm.i)
            wiring.connect(mod, mx.o, wiring.flipped(self.o[2 * r]))
            for k in range(m):
                wiring.connect(mod, dm.o[k], mids[k].i[r])
                wiring.connect(mod, mids[k].o[r], mx.i[k])
        return mod



def fabric_verilog_text(ports: int, middle: int, lanes: int, dtype, name: str, *, fault=None,
                        shared: bool = True, form: str | None = None, progress=None) -> str:
    """Verilog for FRED_m(P) with top module ``name``.

    ``form`` (:data:`fred.hdl.fabric.hier.FORMS`; default ``"shared"``, or ``"flat"`` with
    ``shared=False``): ``"flat"`` is ``emit(Fabric(...), name)``, Amaranth emits every cell as
    its own module (slow for large P: each cell, with its adders, is converted separately).
    ``"shared"`` emits the same fabric with each *kind* of cell converted once, as a module
    (``fred_r_m3_l4_fp16``, ``fred_d_...``, ``fred_rd_...``, ``fred_demux_...``,
    ``fred_mux_...``), which every cell of that kind instantiates; the wiring and
    configuration slices are the same code. ``"hier"`` also shares the lane adder and each
    sub-fabric size (:mod:`fred.hdl.fabric.hier`): the form for real widths. Reproducible in every
    form. ``progress(what)`` is called before each module (shared and hier forms).
    """
    from fred.hdl.verilog import emit

    form = form or ("shared" if shared else "flat")
    if form not in FORMS:
        raise ValueError(f"unknown Verilog form {form!r}; known: {', '.join(FORMS)}")
    if form == "flat":
        return emit(Fabric(ports, middle, lanes, dtype, fault=fault), name)
    registry = {}
    fab = Fabric(ports, middle, lanes, dtype, fault=fault, _shared=registry, _hier=form == "hier")
    return emit_modules(fab, name, registry, progress)


def emit_with_shared(component, name: str, registry: dict, progress=None) -> str:
    """Verilog of ``component`` (top module ``name``) followed by the shared modules its
    fabric put into ``registry`` while it was emitted (see :func:`fabric_verilog_text`)."""
    return emit_modules(component, name, registry, progress)


# ---------------------------------------------------------------------------------------------
# fred verilog fabric
# ---------------------------------------------------------------------------------------------
def verilog_build(args, target):
    from fred import FredError

    form = resolve_form("fabric", args.lanes, getattr(args, "form", "auto"))
    try:
        check_fabric_params(args.ports, args.middle, args.lanes, args.dtype, form)
    except ValueError as exc:
        raise FredError(str(exc)) from None
    name = args.name or f"fred{args.middle}_p{args.ports}"
    if not name.isidentifier():
        raise FredError(f"module name {name!r} is not a valid identifier")
    # shared (default up to AUTO_HIER_LANES lanes): one module per cell kind; hier: also one
    # module per lane adder and sub-fabric size (fred.hdl.fabric.hier)
    text = fabric_verilog_text(args.ports, args.middle, args.lanes, args.dtype, name, form=form,
                               progress=getattr(args, "progress", None))
    return text, name
