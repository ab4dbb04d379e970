"""Online unicast routing for the switch's default index (FRED-SPEC §4: "all-unicast, route online").

Packets with the reserved phase index 255 name their destination output port in the header's
port byte (:mod:`fred.contract.packet`). The control unit gathers such packets into an *online
round* (a partial permutation: at most one packet per input, per output) and needs a fabric
configuration for it on the fly; this module computes that configuration.

The rule (greedy, per instance of the recursive structure, inputs in index order): FRED_m(P)
with P >= 3 has r = P // 2 R cells (2 inputs, m outputs) in front of m middle copies and r D cells
(m inputs, 2 outputs) behind them (odd P: a 1 -> m demux and an m -> 1 mux for the last port).
Input x going to output y takes the lowest middle copy k that neither the other input of its
R cell nor the input going to the other output of y's D cell already took (among inputs before
x). At most two copies are excluded, so with m >= 3 a copy is always free: unicast on FRED_m is
strict-sense non-blocking for m >= 3, and the greedy choice never fails, whatever the order. In
copy k the pair continues as input x // 2 -> output y // 2 (the same rule, one level down); the
base FRED_m(2) is an RD cell in PASS or CROSS. With m = 2 the greedy choice can fail (FRED_2 is
only rearrangeably non-blocking); the switch refuses online routing there at build time.

* :func:`online_modes` -- the rule in plain Python: cell modes for a set of pairs (the reference);
* :func:`online_config` -- the same as the flat configuration vector (``fabric.config_bits``);
* :class:`OnlineRouter` -- the rule as combinational Amaranth logic (the control unit's copy):
  ``valid[x]``, ``dst[x]`` in, ``config`` out, equal to :func:`online_config` bit for bit
  (tests/sim/test_switch_online.py checks random permutations in simulation).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, Value

from fred.hdl.fabric import config_layout, config_bits
from fred.hdl.netlist import CellAddr, DemuxMode, DMode, MuxMode, RDMode, RMode, idle_mode
from fred.hdl.netlist import child_ports, netlist
from fred.hdl.cells import DCell, RCell

__all__ = ["online_modes", "online_config", "OnlineRouter", "check_online_middle"]


def check_online_middle(middle: int) -> None:
    """Online routing needs m >= 3 (strict-sense non-blocking unicast); one-line ValueError."""
    if middle < 3:
        raise ValueError(f"online routing (default index 255) needs middle >= 3: FRED_{middle} "
                         f"unicast is only rearrangeably non-blocking, so a greedy on-the-fly "
                         f"choice of middle copies can fail; build with middle >= 3 or online=False")


def _choose(x, dst, k, r, middle):
    """The greedy copy for input x (dst: input -> output of the pairs before x, k their copies)."""
    excl = set()
    for y, ky in k.items():
        if x < 2 * r and y < 2 * r and x // 2 == y // 2:
            excl.add(ky)
        if dst[x] < 2 * r and dst[y] < 2 * r and dst[x] // 2 == dst[y] // 2:
            excl.add(ky)
    free = [c for c in range(middle) if c not in excl]
    if not free:
        raise ValueError(f"no free middle copy for input {x} (m={middle})")
    return free[0]


def _route(path, P, middle, pairs, modes):
    if not pairs:
        return
    if P == 2:
        cross = any(x != y for x, y in pairs.items())
        modes[CellAddr(path, "rd", 0)] = RDMode.CROSS if cross else RDMode.PASS
        return
    r = P // 2
    k = {}
    for x in sorted(pairs):
        k[x] = _choose(x, pairs, k, r, middle)
    for j in range(r):
        modes[CellAddr(path, "in", j)] = RMode((k.get(2 * j), k.get(2 * j + 1)))
        src = tuple(next((k[x] for x, y in pairs.items() if y == 2 * j + i), None) for i in (0, 1))
        modes[CellAddr(path, "out", j)] = DMode(src)
    if P % 2:
        modes[CellAddr(path, "demux", 0)] = DemuxMode(k.get(2 * r))
        modes[CellAddr(path, "mux", 0)] = MuxMode(next((k[x] for x, y in pairs.items() if y == 2 * r), None))
    for c in range(middle):
        sub = {x // 2: y // 2 for x, y in pairs.items() if k[x] == c}
        _route(path + (c,), child_ports(P), middle, sub, modes)


def online_modes(P: int, middle: int, pairs: dict) -> dict:
    """Cell modes (every cell of FRED_middle(P)) routing ``pairs`` (input -> output, a partial
    permutation) by the greedy rule of the module docstring."""
    check_online_middle(middle)
    pairs = dict(pairs)
    if len(set(pairs.values())) != len(pairs):
        raise ValueError(f"pairs {pairs} send two inputs to one output")
    for x, y in pairs.items():
        if not (0 <= x < P and 0 <= y < P):
            raise ValueError(f"pair {x} -> {y} out of range for {P} ports")
    net = netlist(P, middle)
    modes = {c: idle_mode(net.kind[c]) for c in net.cells}
    _route((), P, middle, pairs, modes)
    return modes


def online_config(P: int, middle: int, pairs: dict) -> int:
    """The flat fabric configuration vector for ``pairs`` (:func:`online_modes`)."""
    return config_bits(P, middle, cell_modes=online_modes(P, middle, pairs))


class OnlineRouter(Elaboratable):
    """Combinational copy of :func:`online_config`: inputs ``valid`` (P bits) and ``dst[x]``
    (output port of input x), output ``config`` (the fabric configuration vector). With
    ``ideal`` the configuration of :class:`fred.hdl.switch.ideal.IdealFabric` instead (bit
    ``q * P + x``: input x feeds output q)."""

    def __init__(self, ports: int, middle: int, ideal: bool = False):
        self.P, self.middle, self.ideal = ports, middle, ideal
        self.valid = Signal(ports, name="on_valid")
        self.dst = [Signal(range(ports), name=f"on_dst{x}") for x in range(ports)]
        if ideal:
            self.config = Signal(ports * ports, name="on_config")
            return
        check_online_middle(middle)
        self.offsets = {c: (off, w) for c, off, w in config_layout(ports, middle)}
        self.config = Signal(sum(w for _, w in self.offsets.values()), name="on_config")

    def elaborate(self, platform):
        m = Module()
        if self.ideal:
            P = self.P
            m.d.comb += self.config.eq(Cat(*[self.valid[x] & (self.dst[x] == q)
                                             for q in range(P) for x in range(P)]))
            return m
        self._parts = []
        self._instance(m, (), self.P, [self.valid[x] for x in range(self.P)], list(self.dst))
        fields = sorted(self._parts, key=lambda t: t[0])
        chunks, pos = [], 0
        for off, w, val in fields:
            if off > pos:
                chunks.append(Const(0, off - pos))
            chunks.append(_fit(val, w))
            pos = off + w
        if pos < len(self.config):
            chunks.append(Const(0, len(self.config) - pos))
        word = Cat(*chunks)
        m.d.comb += self.config.eq(word)
        return m

    def _put(self, cell, value):
        off, w = self.offsets[cell]
        self._parts.append((off, w, value))

    def _instance(self, m, path, P, valid, dst):
        # long: one level of the greedy rule in gates
        """Logic of one instance: ``valid[x]`` / ``dst[x]`` are the instance's requests."""
        mid, tag = self.middle, "_".join(map(str, path)) or "top"
        if P == 2:
            cross = (valid[0] & (dst[0] == 1)) | (valid[1] & (dst[1] == 0))
            self._put(CellAddr(path, "rd", 0), _fit(Mux(cross, RDMode.CROSS.value, RDMode.PASS.value), 3))
            return
        r = P // 2
        k = []
        for x in range(P):
            excl = Const(0, mid)
            for y in range(x):
                same_r = x < 2 * r and y < 2 * r and x // 2 == y // 2
                same_d = (dst[x] < 2 * r) & (dst[y] < 2 * r) & ((dst[x] >> 1) == (dst[y] >> 1))
                hit = valid[y] if same_r else valid[y] & same_d
                excl = excl | Mux(hit, (Const(1, mid) << k[y])[:mid], 0)
            kx = Signal(range(mid), name=f"on_k_{tag}_{x}")
            for c in reversed(range(mid)):
                with m.If(~excl[c]):
                    m.d.comb += kx.eq(c)
            k.append(kx)
        r_lay, d_lay = RCell.config_layout(mid), DCell.config_layout(mid)
        for j in range(r):
            a, b = 2 * j, 2 * j + 1
            self._put(CellAddr(path, "in", j), _pack(r_lay, {
                "sel0": Mux(valid[a], k[a], 0), "use0": valid[a],
                "sel1": Mux(valid[b], k[b], 0), "use1": valid[b], "reduce": Const(0, 1)}))
            fields = {}
            for i in (0, 1):
                use, src = self._source(m, valid, dst, k, 2 * j + i, f"{tag}_{j}_{i}")
                fields.update({f"src{i}": src, f"use{i}": use})
            self._put(CellAddr(path, "out", j), _pack(d_lay, fields))
        if P % 2:
            x = 2 * r
            self._put(CellAddr(path, "demux", 0), Mux(valid[x], k[x] + 1, 0))
            use, src = self._source(m, valid, dst, k, 2 * r, f"{tag}_mux")
            self._put(CellAddr(path, "mux", 0), Mux(use, src + 1, 0))
        for c in range(mid):
            sub_valid, sub_dst = [], []
            for j in range((P + 1) // 2):
                xs = [x for x in (2 * j, 2 * j + 1) if x < P]
                v = Signal(name=f"on_v_{tag}_{c}_{j}")
                d = Signal(range(child_ports(P)), name=f"on_d_{tag}_{c}_{j}")
                for x in xs:
                    with m.If(valid[x] & (k[x] == c)):
                        m.d.comb += [v.eq(1), d.eq(dst[x] >> 1)]
                sub_valid.append(v)
                sub_dst.append(d)
            self._instance(m, path + (c,), child_ports(P), sub_valid, sub_dst)

    def _source(self, m, valid, dst, k, out, name):
        """(used, copy) of the input whose pair ends at instance output ``out``."""
        use = Signal(name=f"on_use_{name}")
        src = Signal(range(self.middle), name=f"on_src_{name}")
        for x in range(len(valid)):
            with m.If(valid[x] & (dst[x] == out)):
                m.d.comb += [use.eq(1), src.eq(k[x])]
        return use, src


def _fit(value, width):
    """``value`` zero-extended or cut to ``width`` bits."""
    v = Value.cast(value)
    return Cat(v, Const(0, width - len(v))) if len(v) < width else v[:width]


def _pack(layout, values):
    """Amaranth value of a cell's config StructLayout from field values (offset order)."""
    fields = sorted(((f.offset, f.width, name) for name, f in layout), key=lambda t: t[0])
    return Cat(*[_fit(values[name], w) for _, w, name in fields])
