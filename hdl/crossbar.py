"""The baseline FRED argues against: a P-port crossbar that reduces at the *output* port.

FRED-SPEC §1: "output-port reduction designs need 2x link BW for All-Reduce and Px for a P-port
Reduce". The paper never builds one; this module does, so that ``fred compare`` can measure it
against FRED_3(P) (cells, flip-flops and throughput from the same tools).

Ports (the fabric's style): ``i`` and ``o`` are arrays of P streams of
``ArrayLayout(width, lanes)`` (``amaranth.lib.stream``, valid/ready), and ``cfg`` is a
``P * P``-bit input: bit ``j * P + k`` set means input k contributes to output j (build it with
:func:`crossbar_config`). A flow (IPs -> OPs) sets, for every output in OPs, the mask IPs; flows
must be disjoint in ports, so outputs that share an input have identical masks (a *group*, which
consumes its inputs in lockstep). Output j with a one-bit mask is a plain crossbar path
(unicast / multicast, data copied unchanged); with two or more bits it is a reduction.

Two variants (``variant=``):

``"tree"`` -- line rate, P-1 adders per lane per output.
    Every output has a balanced binary adder tree over *all* P inputs (leaf k = input k, or the
    additive identity when k is not in the mask: ``-0`` for floating point, ``0`` for int32;
    ``x + -0 == x`` exactly for every non-NaN x and NaN sums are canonical NaN anyway, so the
    result equals the tree over the present operands). The tree is pairwise by index per level
    (leaves (0,1), (2,3), ...; an odd last node is delayed to the next level). One beat per
    cycle per port; reduction latency ``ceil(log2 P) * adder latency`` cycles.

``"serial"`` -- one adder per lane per output, 1/(n-1) of line rate for an n-input reduction.
    The output's single :class:`~fred.hdl.adders.VectorAdder` folds the inputs in port order,
    ``((x_k0 + x_k1) + x_k2) + ...``. To keep its pipeline busy it works on blocks of L beats
    (L = adder latency): phase 0 issues ``x_k0 + x_k1`` for L consecutive beats, phase p issues
    ``acc + x_k(p+1)`` for the same L beats, where ``acc`` is the adder's own output (the partial
    sum of the same beat issued L cycles earlier). A beat slot whose phase-0 operands were not
    both valid is a bubble for the whole block, so short or stalled streams never hang.
    Throughput at zero back-pressure: 1/(n-1) beats per cycle per port (for n = P: 1/(P-1),
    "one adder running at 1/P of line rate"); latency L cycles from the last operand, whose
    beat's first operands were taken ``(n-2) * L`` cycles earlier.

Both: a one-bit-mask output is a 1-cycle registered path. Pipelines stall as a whole per group
(``en`` = every output of the group can take a beat); an output whose beat was taken while its
group stalls drops ``valid`` (no duplicates). Change ``cfg`` only when the crossbar is empty.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .adders import VectorAdder, adder_latency
from .dtypes import get_dtype
from .params import check_lanes, check_ports, rejecting

__all__ = ["Crossbar", "crossbar_config", "VARIANTS", "crossbar_latency", "crossbar_throughput",
           "tree_order", "verilog_build"]

VARIANTS = ("tree", "serial")
#: build-time faults (tests only: the bench must catch them). ``"drop-beat"``: every output
#: silently drops the fourth beat it fires (its inputs are consumed, nothing comes out).
FAULTS = (None, "drop-beat")
#: largest crossbar generated: it has P^2 adders per lane (tree) or P (serial)
MAX_PORTS = 64


def _check(ports, lanes, variant):
    check_ports(ports, MAX_PORTS, "the crossbar has P^2 adders")
    check_lanes(lanes)
    if not isinstance(variant, str) or variant not in VARIANTS:
        raise ValueError(f"unknown crossbar variant {variant!r}; known: {', '.join(VARIANTS)}")


def crossbar_config(ports: int, flows) -> int:
    """Config word for ``flows``: an iterable of ``(input ports, output ports)`` pairs.

    Raises ``ValueError`` naming the port for out-of-range or reused ports or empty sets.
    """
    word = 0
    used_in, used_out = set(), set()
    for n, (ips, ops) in enumerate(flows):
        ips, ops = sorted(set(ips)), sorted(set(ops))
        if not ips or not ops:
            raise ValueError(f"flow {n} has an empty port set")
        for side, ps, used in (("input", ips, used_in), ("output", ops, used_out)):
            for p in ps:
                if not isinstance(p, int) or not 0 <= p < ports:
                    raise ValueError(f"flow {n}: {side} port {p!r} out of range 0..{ports - 1}")
                if p in used:
                    raise ValueError(f"flow {n}: {side} port {p} used by two flows")
                used.add(p)
        mask = sum(1 << k for k in ips)
        for j in ops:
            word |= mask << (j * ports)
    return word


def tree_order(ports: int):
    """The tree variant's reduction tree as nested tuples of input indices (leaves are ints).

    Level by level, nodes are paired by index; an odd last node passes to the next level.
    """
    level = list(range(ports))
    while len(level) > 1:
        nxt = [(level[2 * k], level[2 * k + 1]) for k in range(len(level) // 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _tree_levels(ports: int) -> int:
    n, lv = ports, 0
    while n > 1:
        n = (n + 1) // 2
        lv += 1
    return lv


def crossbar_latency(ports: int, dtype, variant: str, inputs: int) -> int:
    """Cycles from the last input beat of an output beat being accepted to that output beat
    being valid (zero back-pressure), for an output reducing ``inputs`` inputs (1 = plain
    path). Serial: the other operands of the beat were taken up to ``(inputs-2) * L`` cycles
    before."""
    L = adder_latency(dtype)
    if inputs <= 1:
        return 1
    if variant == "tree":
        return _tree_levels(ports) * L
    return L


def crossbar_throughput(variant: str, inputs: int) -> float:
    """Beats per cycle per output port at zero back-pressure (the design's rate)."""
    if inputs <= 1 or variant == "tree":
        return 1.0
    return 1.0 / (inputs - 1)


class Crossbar(wiring.Component):
    """P-port output-reducing crossbar (see the module docstring).

    ``Crossbar(ports, lanes, dtype, variant="tree")``; ports ``i[P]``, ``o[P]`` (streams of
    ``ArrayLayout(width, lanes)``), ``cfg`` (``P*P`` bits). Attributes ``latency`` (reduction
    latency of the tree variant, or of a P-input serial reduction), ``adders_per_output``.
    """

    def __init__(self, ports: int, lanes: int, dtype="fp16", variant: str = "tree", *, fault=None):
        with rejecting(self):
            _check(ports, lanes, variant)
            self.dtype = get_dtype(dtype)
            if fault not in FAULTS:
                raise ValueError(f"unknown crossbar fault {fault!r}; known: drop-beat")
        self.fault = fault
        ports, lanes = int(ports), int(lanes)  # checked: ints (numpy ones too)
        self.ports, self.lanes, self.variant = ports, lanes, variant
        self.adder_latency = adder_latency(self.dtype)
        self.latency = crossbar_latency(ports, self.dtype, variant, ports)
        self.adders_per_output = ports - 1 if variant == "tree" else 1
        self.layout = data.ArrayLayout(self.dtype.width, lanes)
        sig = stream.Signature(self.layout)
        super().__init__({
            "i": In(sig).array(ports),
            "o": Out(sig).array(ports),
            "cfg": In(ports * ports),
        })

    # -- helpers ------------------------------------------------------------------------------
    def _identity(self):
        """A beat of additive identities: -0 for floats, 0 for ints."""
        w = self.dtype.width
        e = self.dtype.sign_bit if self.dtype.is_float else 0
        return Const(sum(e << (k * w) for k in range(self.lanes)), w * self.lanes)

    def elaborate(self, platform):
        m = Module()
        P = self.ports
        masks = [self.cfg[j * P:(j + 1) * P] for j in range(P)]

        # ok[j]: output j can take a beat this cycle; en[j]: output j's group advances
        ok = [Signal(name=f"ok{j}") for j in range(P)]
        en = [Signal(name=f"en{j}") for j in range(P)]
        take = [Signal(name=f"take{j}") for j in range(P)]   # output j's pipeline advances
        for j in range(P):
            m.d.comb += ok[j].eq(~self.o[j].valid | self.o[j].ready)
        for j in range(P):
            terms = ok[j]
            for k in range(P):
                if k != j:
                    same = (masks[j] == masks[k])
                    terms = terms & (~same | ok[k])
            m.d.comb += en[j].eq(terms)

        # single[j]: one-bit mask (plain path); sel[j]: its input
        readies = [[] for _ in range(P)]  # input k -> list of ready terms
        for j in range(P):
            mk = masks[j]
            single = Signal(name=f"single{j}")
            m.d.comb += single.eq(mk.any() & ((mk & (mk - 1)) == 0))
            if self.variant == "tree":
                self._tree_output(m, j, mk, single, en[j], take[j], readies)
            else:
                self._serial_output(m, j, mk, single, en[j], take[j], readies)
        for k in range(P):
            expr = Const(0, 1)
            for t in readies[k]:
                expr = expr | t
            m.d.comb += self.i[k].ready.eq(expr)
        return m

    def _bypass(self, m, j, mk, take):
        """One-cycle registered plain path for output j (one-bit mask); returns payload reg."""
        P = self.ports
        W = self.dtype.width * self.lanes
        sel_payload = Const(0, W)
        for k in range(P):
            sel_payload = Mux(mk[k], self.i[k].payload.as_value(), sel_payload)
        reg = Signal(W, name=f"byp{j}")
        with m.If(take):
            m.d.sync += reg.eq(sel_payload)
        return reg

    def _out_tags(self, m, j, depth, fire, take, name):
        """Valid tags through a ``depth``-stage pipeline; last tag drops when taken while
        the group stalls. Returns the last tag signal."""
        tags = [Signal(name=f"{name}{j}_t{d}") for d in range(depth)]
        if self.fault == "drop-beat":  # mutant: the 4th fired beat never reaches the output
            n = Signal(3, name=f"{name}{j}_fired")
            with m.If(take & fire & (n != 7)):
                m.d.sync += n.eq(n + 1)
            fire = fire & (n != 3)
        with m.If(take):
            m.d.sync += tags[0].eq(fire)
            for d in range(1, depth):
                m.d.sync += tags[d].eq(tags[d - 1])
        with m.Elif(self.o[j].valid & self.o[j].ready):
            m.d.sync += tags[-1].eq(0)
        return tags[-1]

    def _tree_output(self, m, j, mk, single, en, take, readies):
        P, L = self.ports, self.adder_latency
        W = self.dtype.width * self.lanes
        allv = Const(1, 1)
        for k in range(P):
            allv = allv & (~mk[k] | self.i[k].valid)
        fire = Signal(name=f"fire{j}")
        m.d.comb += [take.eq(en), fire.eq(en & allv & mk.any())]
        for k in range(P):
            readies[k].append(mk[k] & fire)
        # adder tree
        ident = self._identity()
        level = [Mux(mk[k], self.i[k].payload.as_value(), ident) for k in range(P)]
        n_add = 0
        depth = 0
        while len(level) > 1:
            nxt = []
            for p in range(len(level) // 2):
                add = m.submodules[f"o{j}_add{n_add}"] = VectorAdder(self.dtype, self.lanes)
                n_add += 1
                y = Signal(W, name=f"o{j}_l{depth}_{p}")
                m.d.comb += [add.a.eq(level[2 * p]), add.b.eq(level[2 * p + 1]),
                             add.en.eq(take), y.eq(add.y.as_value())]
                nxt.append(y)
            if len(level) % 2:  # odd node waits L cycles for the next level
                v = level[-1]
                for d in range(L):
                    r = Signal(W, name=f"o{j}_l{depth}_dly{d}")
                    with m.If(take):
                        m.d.sync += r.eq(v)
                    v = r
                nxt.append(v)
            level = nxt
            depth += 1
        assert n_add == P - 1
        tree_y = level[0]
        tag_tree = self._out_tags(m, j, depth * L, fire & ~single, take, "tt")
        tag_byp = self._out_tags(m, j, 1, fire & single, take, "tb")
        byp = self._bypass(m, j, mk, take)
        m.d.comb += [
            self.o[j].valid.eq(Mux(single, tag_byp, tag_tree)),
            self.o[j].payload.eq(Mux(single, byp, tree_y)),
        ]

    def _serial_order(self, m, j, mk):
        """Which inputs the serial adder folds, in port order: the first member, the input of
        operand b this cycle (``bidx``), the one after it (``nxt``, ``last`` when none), and the
        block schedule state (``cur``, ``phase0``, ``slot``, ``slot_ok``)."""
        P, L = self.ports, self.adder_latency
        nbits = max(1, (P - 1).bit_length())
        # first member (lowest set bit) and "next member after k"
        first = Signal(range(P), name=f"first{j}")
        expr = Const(0, nbits)
        for k in reversed(range(P)):
            expr = Mux(mk[k], k, expr)
        m.d.comb += first.eq(expr)

        def next_after(cur):
            # lowest set bit of mask above cur; P (none) if there is none
            res = Const(P, nbits + 1)
            for k in reversed(range(P)):
                res = Mux(mk[k] & (cur < k), k, res)
            return res

        cur = Signal(range(P), name=f"cur{j}")          # operand b's input in phases > 0
        phase0 = Signal(init=1, name=f"ph0_{j}")
        slot = Signal(range(max(L, 2)), name=f"slot{j}")
        slot_ok = Signal(L, name=f"slotok{j}")
        second = Signal(range(P + 1), name=f"second{j}")
        m.d.comb += second.eq(next_after(first))
        bidx = Signal(range(P + 1), name=f"bidx{j}")     # operand b's input this cycle
        m.d.comb += bidx.eq(Mux(phase0, second, cur))
        nxt = Signal(range(P + 1), name=f"nxt{j}")
        m.d.comb += nxt.eq(next_after(bidx))
        last = Signal(name=f"last{j}")
        m.d.comb += last.eq(nxt == P)
        return first, cur, phase0, slot, slot_ok, bidx, nxt, last

    def _serial_output(self, m, j, mk, single, en, take, readies):
        P, L = self.ports, self.adder_latency
        first, cur, phase0, slot, slot_ok, bidx, nxt, last = self._serial_order(m, j, mk)

        def field(sig_list, idx):
            res = sig_list[0]
            for k in range(1, P):
                res = Mux(idx == k, sig_list[k], res)
            return res

        valids = [self.i[k].valid for k in range(P)]
        pays = [self.i[k].payload.as_value() for k in range(P)]
        cur_v, cur_p = field(valids, bidx), field(pays, bidx)
        first_v, first_p = field(valids, first), field(pays, first)
        s_ok = Signal(name=f"sok{j}")
        m.d.comb += s_ok.eq(slot_ok.bit_select(slot, 1))

        reduce_ = Signal(name=f"red{j}")
        m.d.comb += reduce_.eq(mk.any() & ~single)
        # this cycle's decision
        both = Signal(name=f"both{j}")
        m.d.comb += both.eq(first_v & cur_v)
        stall = Signal(name=f"stall{j}")
        m.d.comb += stall.eq(reduce_ & ~phase0 & s_ok & ~cur_v)
        issue = Signal(name=f"issue{j}")   # a valid add is issued this cycle
        m.d.comb += [
            take.eq(en & ~stall),
            issue.eq(take & reduce_ & Mux(phase0, both, s_ok)),
        ]

        add = m.submodules[f"o{j}_add"] = VectorAdder(self.dtype, self.lanes)
        m.d.comb += [
            add.a.eq(Mux(phase0, first_p, add.y.as_value())),
            add.b.eq(cur_p),
            add.en.eq(take),
        ]
        # consumption: phase 0 takes first and cur, later phases take cur
        for k in range(P):
            readies[k].append(issue & (bidx == k))
            readies[k].append(issue & phase0 & (first == k))

        # schedule state
        with m.If(~reduce_):
            m.d.sync += [phase0.eq(1), slot.eq(0), slot_ok.eq(0)]
        with m.Elif(take):
            with m.If(phase0):
                m.d.sync += slot_ok.bit_select(slot, 1).eq(both)
            with m.If(slot == L - 1):
                m.d.sync += slot.eq(0)
                with m.If(last):
                    m.d.sync += phase0.eq(1)
                with m.Else():
                    m.d.sync += [phase0.eq(0), cur.eq(nxt)]
            with m.Else():
                m.d.sync += slot.eq(slot + 1)
        self._serial_result(m, j, mk, single, en, take, readies, issue & last, add)

    def _serial_result(self, m, j, mk, single, en, take, readies, done, add):
        """Output j of the serial variant: the sum leaves the adder L cycles after the final
        phase's issue (``done``), a one-bit mask takes the 1-cycle plain path."""
        P, L = self.ports, self.adder_latency
        # outputs: reduction results leave the adder L cycles after the final phase's issue
        tag_red = self._out_tags(m, j, L, done, take, "ts")
        # plain path: fire when the group advances and the single input is valid
        fire_b = Signal(name=f"fireb{j}")
        sel_v = Const(0, 1)
        for k in range(P):
            sel_v = sel_v | (mk[k] & self.i[k].valid)
        m.d.comb += fire_b.eq(en & single & sel_v)
        for k in range(P):
            readies[k].append(mk[k] & fire_b)
        tag_byp = self._out_tags(m, j, 1, fire_b, take, "tb")
        byp = self._bypass(m, j, mk, take)
        m.d.comb += [
            self.o[j].valid.eq(Mux(single, tag_byp, tag_red)),
            self.o[j].payload.eq(Mux(single, byp, add.y.as_value())),
        ]


# ---- fred verilog crossbar ----------------------------------------------------------------------

def verilog_build(args, target="crossbar"):
    xb = Crossbar(args.ports, args.lanes, args.dtype, args.variant)
    return xb, f"xbar_{args.variant}_p{args.ports}"
