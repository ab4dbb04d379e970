"""The FRED microswitches (SPEC section 2): R (2 x m), D (m x 2) and RD (2 x 2) cells.

Every port is an :class:`amaranth.lib.stream` interface whose payload is
``data.ArrayLayout(width, lanes)`` (lane 0 in the low bits); ``width`` comes from the element
type (:mod:`fred.hdl.dtypes`). Reductions add ``in0 + in1`` lane by lane with
:class:`fred.hdl.adders.VectorAdder`.

Ports and configuration
-----------------------
With ``S = stream.Signature(data.ArrayLayout(width, lanes))``:

* ``RCell(middle, lanes, dtype)``: ``i: In(S).array(2)``, ``o: Out(S).array(middle)``,
  ``cfg: In(RCell.config_layout(middle))``;
* ``DCell(middle, lanes, dtype)``: ``i: In(S).array(middle)``, ``o: Out(S).array(2)``,
  ``cfg: In(DCell.config_layout(middle))``;
* ``RDCell(lanes, dtype)``: ``i: In(S).array(2)``, ``o: Out(S).array(2)``, ``cfg: In(3)``
  (the :class:`~fred.hdl.netlist.modes.RDMode` value).

In Verilog the ports are ``i__<k>__{valid,ready,payload}``, ``o__<j>__{...}``, ``cfg``
(the configuration; not ``config``, a Verilog keyword every tool would need escaped), ``clk`` and ``rst``
(synchronous, active high). In an Amaranth testbench set the config with
``ctx.set(cell.cfg.as_value(), code)`` (RCell/DCell configs are struct views).

The mode (:class:`~fred.hdl.netlist.modes.RMode`, :class:`~fred.hdl.netlist.modes.DMode`,
:class:`~fred.hdl.netlist.modes.RDMode`) is turned into the ``cfg`` integer by the cell's
``encode`` class method, which validates it (one-line ``ValueError``). ``cfg`` must be held
stable while beats are in flight: change it only when the cell is drained (every accepted beat
has left). A raw ``cfg`` value that no valid mode encodes (a select >= m, RD value 7) leaves
the affected inputs not ready and the outputs idle; it never loses or invents beats.

Latency and throughput contract
-------------------------------
``latency`` = :func:`cell_latency` (dtype) cycles, the element adder's pipeline depth (int32: 1,
fp16/bf16/fp32: 3), in **every** mode of every cell: a beat (or a pair of beats, for a sum)
transferred at an input in cycle ``t`` is offered (``valid``) at its output(s) in cycle
``t + latency`` when nothing downstream stalls. Pass-through paths are delay lines as deep as the
adder, so the latency of a fabric depends only on its number of stages. With no back-pressure
each port moves one beat per cycle in every mode.

Pipelines and flows
-------------------
Each cell has two *datapaths* ``A`` and ``B``: a pipeline of ``latency`` registers (payload and
valid bit) that advances while its enable is high. ``A`` carries ``in0`` (R, RD) or the input
``src[0]`` (D), and is the one with the adder, so it carries ``in0 + in1`` when the mode
reduces; ``B`` carries ``in1`` (R, RD) or ``src[1]`` (D). Each output has a one-beat skid
register and is attached (by ``cfg``) to at most one datapath; a broadcast attaches both
outputs to one datapath. Consequences:

* two flows through one cell (PASS/CROSS of an RD cell, two used inputs of an R cell, two
  outputs of a D cell without broadcast) use different datapaths with separate handshakes and
  never stall each other;
* a reduction is a *join*: both inputs transfer together (``in0.ready = en_A & in1.valid`` and
  vice versa), at the pace of the slower;
* a broadcast is a *fork with a one-beat skid per output*: the datapath advances while every
  attached output's skid is empty; a beat leaving the datapath is taken by each output that is
  ready and parked in the skid of each output that is not. A stalled output therefore stops its
  sibling after at most one beat (both outputs belong to the same flow);
* ``ready`` of an input depends only on registers, the config and (for a join) the other
  input's ``valid``; ``valid`` and ``payload`` of an output depend only on registers and the
  config; an output's ``ready`` only feeds registers (its skid and, through the skid, the
  datapath enable one cycle later). No combinational path runs from an output's ``ready`` to
  any port, so cells chain into deep fabrics without long ready paths;
* an input whose datapath feeds no output keeps ``ready`` low.

Under back-pressure nothing is lost, duplicated or reordered; a datapath stalled by its outputs
holds its bubbles (no compaction), so throughput under random back-pressure is below the
link-level maximum, never above it.

Bad parameters (``middle < 2``, ``lanes < 1``, an unknown element type, an unknown ``fault``, a mode
a cell does not have) raise a one-line ``ValueError`` naming the value (``TypeError`` for a
``middle`` or ``lanes`` that is not an integer; :mod:`fred.hdl.params`).

``fault="corrupt-lane"`` builds a deliberately broken cell that flips bit 0 of the last lane of
every *sum* (the adder output); it exists only so a test can prove the checker fails.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fred.hdl.adders import VectorAdder, adder_latency
from fred.hdl.dtypes import get_dtype
from fred.hdl.netlist import DMode, RDMode, RMode
from fred.hdl.params import check_lanes, check_middle, rejecting

__all__ = ["RCell", "DCell", "RDCell", "cell_latency", "stream_signature", "FAULTS",
           "CELL_CLASSES", "build_cell", "check_cell_params", "verilog_build"]

#: build-time faults a cell can be made with (only for tests that prove the checker fails)
FAULTS = (None, "corrupt-lane")


def cell_latency(dtype) -> int:
    """Latency in cycles of every cell (every mode) for element type ``dtype``."""
    return adder_latency(get_dtype(dtype))


def stream_signature(lanes: int, dtype) -> stream.Signature:
    """The stream signature of every cell and fabric port:
    ``stream.Signature(data.ArrayLayout(width, lanes))``, ``lanes`` elements of ``dtype`` per
    beat (lane 0 in the low bits)."""
    return stream.Signature(data.ArrayLayout(get_dtype(dtype).width, lanes))


def _sel_width(m: int) -> int:
    return max(1, (m - 1).bit_length())


def _pack(layout: data.StructLayout, values: dict) -> int:
    word = 0
    for name, field in layout:
        v = int(values[name])
        assert 0 <= v < (1 << field.width), (name, v)
        word |= v << field.offset
    return word


class _Cell(wiring.Component):
    """Shared machinery: two datapaths (``A`` with the adder, ``B`` a delay line) and
    per-output skid registers. Subclasses define the ports and the config decoding."""

    kind = "?"
    #: vector adder class (None: VectorAdder); the hierarchical form sets hier.LaneAdders
    adder_class = None

    def __init__(self, signature, *, dtype, lanes, fault=None):
        with rejecting(self):
            self.dtype = get_dtype(dtype)
            self.lanes = check_lanes(lanes)
            if fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r}; known: "
                                 + ", ".join(f for f in FAULTS if f))
        self.fault = fault
        self.latency = cell_latency(self.dtype)
        self.width = self.dtype.width
        #: for sim/formal/cells.py: per datapath (valid bits, delays, adder or None); "skid" regs
        self.probes = {}
        super().__init__(signature)

    @classmethod
    def cell_latency(cls, dtype) -> int:
        """Latency of this cell for ``dtype`` without building it (same for every cell)."""
        return cell_latency(dtype)

    # -- building blocks ----------------------------------------------------------------------
    def _datapath(self, m, name, en, in_valid, a, b=None, use_sum=None):
        """A pipeline of ``latency`` stages; returns (p_valid, p_data) of its last stage."""
        L = self.latency
        W = self.width * self.lanes
        valid = [Signal(name=f"{name}_v{k}") for k in range(L)]
        delay = [Signal(W, name=f"{name}_d{k}") for k in range(L)]
        with m.If(en):
            m.d.sync += [valid[0].eq(in_valid), delay[0].eq(a)]
            for k in range(1, L):
                m.d.sync += [valid[k].eq(valid[k - 1]), delay[k].eq(delay[k - 1])]
        self.probes[name] = (valid, delay, None)
        if b is None:
            return valid[-1], delay[-1]
        add = m.submodules[f"{name}_add"] = (self.adder_class or VectorAdder)(self.dtype, self.lanes)
        self.probes[name] = (valid, delay, add)
        m.d.comb += [add.a.eq(a), add.b.eq(b), add.en.eq(en)]
        y = Signal(W, name=f"{name}_sum")
        if self.fault == "corrupt-lane":
            m.d.comb += y.eq(Value.cast(add.y) ^ (1 << (self.width * (self.lanes - 1))))
        else:
            m.d.comb += y.eq(Value.cast(add.y))
        data_out = Signal(W, name=f"{name}_p")
        m.d.comb += data_out.eq(Mux(use_sum, y, delay[-1]))
        return valid[-1], data_out

    def _outputs(self, m, outs, paths, attach):
        """Connect outputs to datapaths through one-beat skid registers.

        ``outs``: list of output stream interfaces; ``paths``: list of (p_valid, p_data) per
        datapath; ``attach[j][d]``: 1-bit value, output j is fed by datapath d (at most one d
        per j). Returns the enable of each datapath.
        """
        W = self.width * self.lanes
        nd = len(paths)
        skid_v = [Signal(name=f"o{j}_skid_v") for j in range(len(outs))]
        skid_d = [Signal(W, name=f"o{j}_skid_d") for j in range(len(outs))]
        self.probes["skid"] = list(zip(skid_v, skid_d))
        ens = []
        for d in range(nd):
            used = Signal(name=f"dp{d}_used")
            blocked = Signal(name=f"dp{d}_blocked")
            en = Signal(name=f"dp{d}_en")
            m.d.comb += [
                used.eq(Cat(attach[j][d] for j in range(len(outs))).any()),
                blocked.eq(Cat(attach[j][d] & skid_v[j] for j in range(len(outs))).any()),
                en.eq(used & ~blocked),
            ]
            ens.append(en)
        for j, o in enumerate(outs):
            offer_v = Signal(name=f"o{j}_offer_v")
            offer_d = Signal(W, name=f"o{j}_offer_d")
            m.d.comb += offer_v.eq(Cat(attach[j][d] & paths[d][0] & ens[d] for d in range(nd)).any())
            sel = Const(0, W)
            for d in reversed(range(nd)):
                sel = Mux(attach[j][d], paths[d][1], sel)
            m.d.comb += offer_d.eq(sel)
            m.d.comb += [
                o.valid.eq(skid_v[j] | offer_v),
                o.payload.eq(Mux(skid_v[j], skid_d[j], offer_d)),
            ]
            with m.If(skid_v[j]):
                with m.If(o.ready):
                    m.d.sync += skid_v[j].eq(0)
            with m.Elif(offer_v & ~o.ready):
                m.d.sync += [skid_v[j].eq(1), skid_d[j].eq(offer_d)]
        return ens

    def _two_input_core(self, m, n_out, use_a, use_b, use_sum, attach_of):
        """R and RD cells: A = in0 (or in0 + in1), B = in1. ``attach_of(j)`` -> (to A, to B)."""
        i0, i1 = self.i[0], self.i[1]
        en_a = Signal(name="en_a")
        en_b = Signal(name="en_b")
        a_in_v = Signal(name="a_in_valid")
        b_in_v = Signal(name="b_in_valid")
        m.d.comb += [
            a_in_v.eq(use_a & i0.valid & (~use_sum | i1.valid)),
            b_in_v.eq(use_b & ~use_sum & i1.valid),
            i0.ready.eq(use_a & en_a & (~use_sum | i1.valid)),
            i1.ready.eq(Mux(use_sum, use_a & en_a & i0.valid, use_b & en_b)),
        ]
        pa = self._datapath(m, "A", en_a, a_in_v, i0.payload.as_value(), i1.payload.as_value(),
                            use_sum)
        pb = self._datapath(m, "B", en_b, b_in_v, i1.payload.as_value())
        attach = []
        for j in range(n_out):
            ta, tb = attach_of(j)
            sa, sb = Signal(name=f"o{j}_from_a"), Signal(name=f"o{j}_from_b")
            m.d.comb += [sa.eq(ta & use_a), sb.eq(tb & use_b & ~use_sum & ~sa)]
            attach.append((sa, sb))
        ens = self._outputs(m, [self.o[j] for j in range(n_out)], [pa, pb], attach)
        m.d.comb += [en_a.eq(ens[0]), en_b.eq(ens[1])]


class RCell(_Cell):
    """R-microswitch: 2 inputs x ``middle`` outputs, optional reduction (input stage of FRED_m(P)).

    Ports: ``i: In(S).array(2)``, ``o: Out(S).array(middle)``,
    ``config: In(RCell.config_layout(middle))``
    with ``S = stream.Signature(data.ArrayLayout(width, lanes))``.

    Modes (:class:`~fred.hdl.netlist.modes.RMode`): input ``i`` goes to output ``sel[i]`` (``None`` =
    input unused, its ``ready`` stays low); with ``reduce``, ``in0 + in1`` (lane-wise, the
    element type's add) goes to output ``sel[0]``. Outputs no input selects stay idle.

    ``cfg`` layout (``config_layout(middle)``, low bits first): ``sel0`` (select of input
    0), ``use0`` (input 0 used), ``sel1``, ``use1``, ``reduce``; the select fields are
    ``max(1, ceil(log2 middle))`` bits wide. Use :meth:`encode`.

    Latency: ``latency`` = :func:`cell_latency` (dtype) cycles in every mode (see the module
    docstring). Inputs going to different outputs are independent flows with separate
    handshakes; a reduction joins the two inputs.
    """

    kind = "r"

    def __init__(self, middle, lanes, dtype, *, fault=None):
        with rejecting(self):
            self.middle = middle = check_middle(middle)  # an int from here on (numpy ints too)
            sig = stream_signature(check_lanes(lanes), dtype)
        super().__init__({"i": In(sig).array(2), "o": Out(sig).array(middle),
                          "cfg": In(self.config_layout(middle))},
                         dtype=dtype, lanes=lanes, fault=fault)

    @staticmethod
    def config_layout(middle) -> data.StructLayout:
        w = _sel_width(check_middle(middle))
        return data.StructLayout({"sel0": unsigned(w), "use0": 1, "sel1": unsigned(w),
                                  "use1": 1, "reduce": 1})

    @classmethod
    def encode(cls, mode, middle) -> int:
        """Validated :class:`RMode` -> the ``cfg`` integer."""
        check_middle(middle)
        if not isinstance(mode, RMode):
            raise ValueError(f"R-microswitch mode must be an RMode, got {mode!r}")
        mode.validate(middle)
        s0, s1 = mode.sel
        return _pack(cls.config_layout(middle), {
            "sel0": s0 or 0, "use0": s0 is not None, "sel1": s1 or 0, "use1": s1 is not None,
            "reduce": mode.reduce})

    @staticmethod
    def all_modes(middle) -> list:
        """Every valid :class:`RMode` for ``middle`` outputs (including the all-unused one)."""
        opts = [None] + list(range(middle))
        out = [RMode((a, b)) for a in opts for b in opts if a is None or a != b]
        out += [RMode((k, None), reduce=True) for k in range(middle)]
        return out

    @property
    def verilog_name(self) -> str:
        return f"fred_r_m{self.middle}_l{self.lanes}_{self.dtype.name}"

    def elaborate(self, platform):
        m = Module()
        c = self.cfg
        self._two_input_core(
            m, self.middle, use_a=c.use0, use_b=c.use1, use_sum=c.reduce,
            attach_of=lambda j: (c.sel0 == j, c.sel1 == j))
        return m


class DCell(_Cell):
    """D-microswitch: ``middle`` inputs x 2 outputs, optional broadcast (output stage of FRED_m(P)).

    Ports: ``i: In(S).array(middle)``, ``o: Out(S).array(2)``,
    ``config: In(DCell.config_layout(middle))``.

    Modes (:class:`~fred.hdl.netlist.modes.DMode`): output ``j`` takes input ``src[j]`` (``None`` =
    output idle); ``src[0] == src[1]`` is broadcast, one input copied to both outputs (a fork
    with a one-beat skid per output, see the module docstring). Inputs no output takes keep
    ``ready`` low.

    ``cfg`` layout (``config_layout(middle)``, low bits first): ``src0``, ``use0``, ``src1``,
    ``use1``; broadcast is ``use0 & use1 & (src0 == src1)``. Use :meth:`encode`.

    Latency: ``latency`` = :func:`cell_latency` (dtype) cycles in every mode. No adder: both
    datapaths are delay lines of that depth.
    """

    kind = "d"

    def __init__(self, middle, lanes, dtype, *, fault=None):
        with rejecting(self):
            self.middle = middle = check_middle(middle)  # an int from here on (numpy ints too)
            sig = stream_signature(check_lanes(lanes), dtype)
        super().__init__({"i": In(sig).array(middle), "o": Out(sig).array(2),
                          "cfg": In(self.config_layout(middle))},
                         dtype=dtype, lanes=lanes, fault=fault)

    @staticmethod
    def config_layout(middle) -> data.StructLayout:
        w = _sel_width(check_middle(middle))
        return data.StructLayout({"src0": unsigned(w), "use0": 1, "src1": unsigned(w),
                                  "use1": 1})

    @classmethod
    def encode(cls, mode, middle) -> int:
        """Validated :class:`DMode` -> the ``cfg`` integer."""
        check_middle(middle)
        if not isinstance(mode, DMode):
            raise ValueError(f"D-microswitch mode must be a DMode, got {mode!r}")
        mode.validate(middle)
        s0, s1 = mode.src
        return _pack(cls.config_layout(middle), {
            "src0": s0 or 0, "use0": s0 is not None, "src1": s1 or 0, "use1": s1 is not None})

    @staticmethod
    def all_modes(middle) -> list:
        """Every valid :class:`DMode` for ``middle`` inputs (including the all-idle one)."""
        opts = [None] + list(range(middle))
        return [DMode((a, b)) for a in opts for b in opts]

    @property
    def verilog_name(self) -> str:
        return f"fred_d_m{self.middle}_l{self.lanes}_{self.dtype.name}"

    def elaborate(self, platform):
        mod = Module()
        c = self.cfg
        W = self.width * self.lanes
        bcast = Signal(name="bcast")
        mod.d.comb += bcast.eq(c.use0 & c.use1 & (c.src0 == c.src1))
        en = [Signal(name="en_a"), Signal(name="en_b")]
        uses = [c.use0, c.use1 & ~bcast]
        srcs = [c.src0, c.src1]
        paths = []
        for d, name in enumerate("AB"):
            v = Signal(name=f"{name}_in_valid")
            p = Signal(W, name=f"{name}_in_payload")
            vexpr, pexpr = Const(0, 1), Const(0, W)
            for k in reversed(range(self.middle)):
                hit = srcs[d] == k
                vexpr = Mux(hit, self.i[k].valid, vexpr)
                pexpr = Mux(hit, self.i[k].payload.as_value(), pexpr)
            mod.d.comb += [v.eq(uses[d] & vexpr), p.eq(pexpr)]
            paths.append(self._datapath(mod, name, en[d], v, p))
        for k in range(self.middle):
            mod.d.comb += self.i[k].ready.eq(
                (uses[0] & (srcs[0] == k) & en[0]) | (uses[1] & (srcs[1] == k) & en[1]))
        attach = [(c.use0, Const(0, 1)), (bcast, c.use1 & ~bcast)]
        ens = self._outputs(mod, [self.o[0], self.o[1]], paths, attach)
        mod.d.comb += [en[0].eq(ens[0]), en[1].eq(ens[1])]
        return mod


#: RDMode -> (A used, B used, A sums, out0 <- (A, B), out1 <- (A, B))
_RD_TABLE = {
    RDMode.PASS: (1, 1, 0, (1, 0), (0, 1)),
    RDMode.CROSS: (1, 1, 0, (0, 1), (1, 0)),
    RDMode.BCAST0: (1, 0, 0, (1, 0), (1, 0)),
    RDMode.BCAST1: (0, 1, 0, (0, 1), (0, 1)),
    RDMode.SUM0: (1, 0, 1, (1, 0), (0, 0)),
    RDMode.SUM1: (1, 0, 1, (0, 0), (1, 0)),
    RDMode.SUM_BOTH: (1, 0, 1, (1, 0), (1, 0)),
}


class RDCell(_Cell):
    """RD-microswitch: 2 x 2 with reduction and broadcast (FRED_m(2), the recursion's base).

    Ports: ``i: In(S).array(2)``, ``o: Out(S).array(2)``, ``cfg: In(3)`` holding an
    :class:`~fred.hdl.netlist.modes.RDMode` value: PASS 0 (in0->out0, in1->out1), CROSS 1, BCAST0 2
    (in0 -> both), BCAST1 3 (in1 -> both), SUM0 4 (in0 + in1 -> out0), SUM1 5, SUM_BOTH 6. The
    value 7 is no mode: both inputs not ready, both outputs idle. Use :meth:`encode`.

    Latency: ``latency`` = :func:`cell_latency` (dtype) cycles in every mode. PASS and CROSS
    carry two unrelated flows on separate datapaths (neither stalls the other); the sums are a
    join of both inputs; the broadcasts a fork with a one-beat skid per output.
    """

    kind = "rd"
    middle = 2

    def __init__(self, lanes, dtype, *, fault=None):
        with rejecting(self):
            sig = stream_signature(check_lanes(lanes), dtype)
        super().__init__({"i": In(sig).array(2), "o": Out(sig).array(2), "cfg": In(3)},
                         dtype=dtype, lanes=lanes, fault=fault)

    @staticmethod
    def config_layout(middle=None):
        """``unsigned(3)``: the :class:`RDMode` value (``middle`` is ignored)."""
        return unsigned(3)

    @classmethod
    def encode(cls, mode, middle=None) -> int:
        """:class:`RDMode` (or its name, e.g. ``"sum-both"``) -> the ``cfg`` integer."""
        if isinstance(mode, (RMode, DMode)):
            raise ValueError(f"RD-microswitch mode must be an RDMode, got {mode!r}")
        return RDMode.parse(mode).value

    @staticmethod
    def all_modes(middle=None) -> list:
        return list(RDMode)

    @property
    def verilog_name(self) -> str:
        return f"fred_rd_l{self.lanes}_{self.dtype.name}"

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        use_a, use_b, use_sum = Signal(name="use_a"), Signal(name="use_b"), Signal(name="use_sum")
        att = [[Signal(name=f"o{j}_to_{d}") for d in "ab"] for j in range(2)]
        # decoded without a case statement (yosys would emit one incomplete case per signal)
        is_mode = {mode: Signal(name=f"is_{mode.name.lower()}") for mode in _RD_TABLE}
        for mode, sig in is_mode.items():
            m.d.comb += sig.eq(cfg == mode.value)

        def any_of(pick):
            return Cat(is_mode[md] for md, row in _RD_TABLE.items() if pick(row)).any()

        m.d.comb += [
            use_a.eq(any_of(lambda r: r[0])), use_b.eq(any_of(lambda r: r[1])),
            use_sum.eq(any_of(lambda r: r[2])),
            att[0][0].eq(any_of(lambda r: r[3][0])), att[0][1].eq(any_of(lambda r: r[3][1])),
            att[1][0].eq(any_of(lambda r: r[4][0])), att[1][1].eq(any_of(lambda r: r[4][1])),
        ]
        self._two_input_core(m, 2, use_a=use_a, use_b=use_b, use_sum=use_sum,
                             attach_of=lambda j: tuple(att[j]))
        return m


CELL_CLASSES = {"r": RCell, "d": DCell, "rd": RDCell}


def check_cell_params(kind, middle, lanes, dtype) -> None:
    """Validate cell parameters without building (one-line ``ValueError`` naming the value)."""
    if not isinstance(kind, str) or kind not in CELL_CLASSES:
        raise ValueError(f"unknown cell kind {kind!r}; known: r, d, rd")
    check_middle(middle)
    check_lanes(lanes)
    get_dtype(dtype)


def build_cell(kind, *, middle=3, lanes=4, dtype="fp16", fault=None):
    """Build a cell by kind name (``"r"``, ``"d"``, ``"rd"``; ``middle`` is validated but ignored
    for rd)."""
    if not isinstance(kind, str) or kind not in CELL_CLASSES:
        raise ValueError(f"unknown cell kind {kind!r}; known: r, d, rd")
    if kind == "rd":
        check_middle(middle)  # ignored, but must be a valid fabric parameter
        return RDCell(lanes, dtype, fault=fault)
    return CELL_CLASSES[kind](middle, lanes, dtype, fault=fault)


# ---- fred verilog r|d|rd ----------------------------------------------------------------------

def verilog_build(args, target):
    """``(component, top module name)`` for ``fred verilog r|d|rd``."""
    cell = build_cell(target, middle=args.middle, lanes=args.lanes, dtype=args.dtype)
    return cell, cell.verilog_name
