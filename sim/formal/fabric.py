"""Formal harness of a small FRED_m(P) fabric configured for one set of flows, for SymbiYosys.

:class:`FabricHarness` drives every input (``valid``, ``payload``) and every output ``ready``
from free signals (``AnySeq``: any value in any cycle; the reset may come at any cycle too),
sets ``cfg`` to the routing of ``flows`` (:func:`fred.hdl.routing.compiler.route`,
:func:`fred.hdl.fabric.recursive.config_bits`) and asserts one group:

``stream``
    every output holds ``valid`` and ``payload`` until taken.
``conservation``
    for every flow, every input ``q`` and output ``p`` of it: the beats accepted at ``q``
    minus the beats emitted at ``p`` is never negative (``p`` emits nothing before it was
    accepted) and equals the beats *in flight* on the path from ``q`` to ``p``: the valid bits
    of the datapath the flow uses in every cell of the path plus those cells' output skid
    registers (so it never exceeds the path's capacity: ``stages x (cell latency + 1)``).
    Inputs of no flow are never ready, outputs of no flow never valid.
``routing``
    for every flow and output ``p`` of it: a beat picked by the solver (any beat, at any time:
    the next one every input of the flow accepts after the pick) arrives at ``p`` as the beat
    after exactly those in flight before it, and its payload is the beat of its single input
    unchanged (unicast, multicast) or the lane-wise wrapping sum of the picked beats of all the
    flow's inputs (reductions; int32 only, whose adds are exact). With ``conservation``: each
    input reaches exactly the outputs of its flow, beats are never lost, duplicated,
    reordered, mixed between flows or changed.

``conservation`` and ``routing`` also assert helper invariants on the cells' registers
(``cell.probes``; the fabric lists its cells in ``Fabric.probes``) that make the properties
inductive: the in-flight count above, the picked beat's place in the path's queue and, at
every place of the queue, its value (the sum of the inputs joined so far). The cells on each
path and the datapath carrying the flow in each are found from the routing's cell modes and
the structure (:func:`flow_paths`, :func:`fred.sim.formal.cells.cell_flows`), independently of
the RTL. Fabrics with an odd port count (demux and mux cells) are not supported.
"""

from __future__ import annotations

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cat, Const, Elaboratable, Fragment, Module, Mux, Signal

from fred.hdl.fabric import Fabric, config_bits
from fred.hdl.netlist import parse_flow
from fred.hdl.routing import route
from fred.hdl.netlist import Pin, netlist

from .cells import cell_flows

__all__ = ["FabricHarness", "FABRIC_GROUPS", "flow_paths"]

FABRIC_GROUPS = ("stream", "conservation", "routing")


def flow_paths(result) -> dict:
    """``{(flow index, q, p): [(CellAddr, kind, in port, out port, Flow), ...]}``: the cells a
    beat of input ``q`` crosses to output ``p`` (input to output), each with the cell flow
    (:func:`fred.sim.formal.cells.cell_flows`) of its mode that carries it."""
    net = netlist(result.P, result.middle)
    sinks = net.sinks()
    out = {}
    for i, f in enumerate(result.flows):
        for q in sorted(f.inputs):
            stack = [(sinks[Pin(None, "in", q)][0], [])]
            while stack:
                pin, path = stack.pop()
                if pin.cell is None:
                    out[(i, q, pin.index)] = path
                    continue
                c, a = pin.cell, pin.index
                kind = net.kind[c].lower()
                if kind not in ("r", "d", "rd"):
                    raise ValueError(f"cell {c} ({net.kind[c]}): fabrics with demux/mux cells "
                                     f"(odd port counts) are not supported")
                for cf in cell_flows(kind, result.cell_modes[c]):
                    if a in cf.inputs:
                        for b in cf.outputs:
                            stack.append((sinks[Pin(c, "out", b)][0],
                                          path + [(c, kind, a, b, cf)]))
        missing = [(q, p) for q in f.inputs for p in f.outputs if (i, q, p) not in out]
        if missing:
            raise ValueError(f"flow '{f}': no path from input {missing[0][0]} to output "
                             f"{missing[0][1]} in its routing")
    return out


def _cell_object(fabric, addr):
    """The RTL cell at ``addr`` (CellAddr) of an elaborated fabric."""
    inst = fabric
    for k in addr.path:
        inst = inst.probes[f"mid{k}"]
    return inst.probes[addr.stage if addr.stage == "rd" else f"{addr.stage}{addr.index}"]


class FabricHarness(Elaboratable):
    """FRED_``middle``(``ports``) of ``lanes`` x ``dtype`` routing ``flows`` (a list of flow
    texts such as ``"0-3>0"``) with the assertions of ``group``. ``config_flows`` (tests only)
    loads the routing of other flows instead: a wrong configuration the proofs must reject.
    ``track`` limits the ``routing`` group to these outputs (one job per output keeps the
    solver's problem small)."""

    def __init__(self, ports, middle, lanes, dtype, flows, group, *, fault=None,
                 config_flows=None, track=None):
        if group not in FABRIC_GROUPS:
            self._MustUse__silence = True
            raise ValueError(f"unknown property group {group!r}; known: {', '.join(FABRIC_GROUPS)}")
        self.group = group
        self.track = None if track is None else set(track)
        self.fabric = Fabric(ports, middle, lanes, dtype, fault=fault)
        self.fabric._MustUse__silence = True   # elaborated by hand in elaborate()
        self.result = route(ports, middle, [parse_flow(f) for f in flows])
        self.flows = self.result.flows
        cres = self.result if config_flows is None else \
            route(ports, middle, [parse_flow(f) for f in config_flows])
        self.cfg = config_bits(ports, middle, cres)
        if group == "routing" and self.fabric.dtype.name != "int32" and \
                any(len(f.inputs) > 1 for f in self.flows):
            raise ValueError("routing of reductions is checked for int32 only")

    def elaborate(self, platform):
        m = Module()
        fab = self.fabric
        # elaborate now, so that every cell's probes name the registers of this very netlist
        m.submodules.fabric = Fragment.get(fab, platform)
        m.d.comb += fab.cfg.eq(self.cfg)
        self.W = W = len(fab.i[0].payload.as_value())
        for p in fab.i:
            m.d.comb += [p.valid.eq(AnySeq(1)), p.payload.as_value().eq(AnySeq(W))]
        for p in fab.o:
            m.d.comb += p.ready.eq(AnySeq(1))
        if self.group == "stream":
            self._stream(m)
            return m
        self._queues()
        self._conservation(m)
        if self.group == "routing":
            for i, f in enumerate(self.flows):
                for p in sorted(f.outputs):
                    if self.track is None or p in self.track:
                        self._track(m, i, f, p)
        return m

    def _stream(self, m):
        for j, o in enumerate(self.fabric.o):
            held = Signal(name=f"o{j}_held")
            last = Signal(self.W, name=f"o{j}_last")
            m.d.sync += [held.eq(o.valid & ~o.ready), last.eq(o.payload.as_value())]
            with m.If(held):
                m.d.comb += Assert(o.valid & (o.payload.as_value() == last),
                                   f"o{j} holds valid and payload until taken")

    def _queues(self):
        """Per (flow, q, p): the path's registers from the output end, ``(valid, data, key)``;
        ``key`` (cell, datapath) names which inputs of the flow the data has summed (a skid
        register holds beats of the datapath attached to its output)."""
        self.paths = flow_paths(self.result)
        self.queues, self.summed = {}, {}
        for (i, q, p), path in self.paths.items():
            entries = []
            for addr, kind, a, b, cf in reversed(path):
                cell = _cell_object(self.fabric, addr)
                valid, delay, add = cell.probes[cf.datapath]
                datas = [add.y.as_value()] if cf.sum else delay
                key = (addr, cf.datapath)
                self.summed.setdefault((i, p, key), set()).add(q)
                sv, sd = cell.probes["skid"][b]   # holds beats of this datapath only
                entries.append((sv, sd, key))
                entries += [(valid[k], datas[k], key) for k in reversed(range(len(valid)))]
            self.queues[(i, q, p)] = entries

    def _fire(self, s):
        return s.valid & s.ready

    def _conservation(self, m):
        fab = self.fabric
        used_in = {q for f in self.flows for q in f.inputs}
        used_out = {p for f in self.flows for p in f.outputs}
        for k, s in enumerate(fab.i):
            if k not in used_in:
                m.d.comb += Assert(~s.ready, f"input {k} of no flow is never ready")
        for j, s in enumerate(fab.o):
            if j not in used_out:
                m.d.comb += Assert(~s.valid, f"output {j} of no flow is never valid")
        self.diffs = {}
        for (i, q, p), entries in self.queues.items():
            cap = len(entries)
            diff = Signal(range(cap + 2), name=f"diff_f{i}_i{q}_o{p}")
            self.diffs[(i, q, p)] = diff
            fin, fout = self._fire(fab.i[q]), self._fire(fab.o[p])
            inflight = sum((v for v, _, _ in entries), Const(0, range(cap + 1)))
            m.d.comb += [
                Assert(~(fout & (diff == 0)), f"o{p}: no beat of input {q} emitted before it is accepted"),
                Assert(diff == inflight, f"i{q}->o{p}: accepted - emitted = beats in flight"),
                Assert(diff <= cap, f"i{q}->o{p}: in flight <= path capacity {cap}"),
            ]
            m.d.sync += diff.eq(diff + fin - fout)

    def _track(self, m, i, f, p):
        """Follow one beat of flow ``i`` (picked by the solver) to output ``p``."""
        # long: the tracker, its countdowns per input and its invariants on every queue place
        fab, W = self.fabric, self.W
        lanes, width = fab.lanes, fab.dtype.width
        ins = sorted(f.inputs)
        cap = max(len(self.queues[(i, q, p)]) for q in ins)
        o = fab.o[p]
        fout = self._fire(o)
        trk = Signal(name=f"trk_f{i}_o{p}")
        ahead = Signal(range(cap + 2), name=f"ahead_f{i}_o{p}")
        got = {q: Signal(name=f"got_f{i}_o{p}_i{q}") for q in ins}
        cnt = {q: Signal(range(cap + 2), name=f"cnt_f{i}_o{p}_i{q}") for q in ins}
        val = {q: Signal(W, name=f"val_f{i}_o{p}_i{q}") for q in ins}
        nxt = {q: self.diffs[(i, q, p)] + self._fire(fab.i[q]) - fout for q in ins}

        def total(qs):
            return _lane_sum([val[q] for q in sorted(qs)], width, lanes)

        with m.If(trk):
            with m.If(fout):
                with m.If(ahead == 0):
                    m.d.comb += Assert(o.payload.as_value() == total(ins),
                                       f"o{p}: the picked beat arrives in order with its value")
                    m.d.sync += trk.eq(0)
                with m.Else():
                    m.d.sync += ahead.eq(ahead - 1)
            for q in ins:
                with m.If(~got[q] & self._fire(fab.i[q])):
                    with m.If(cnt[q] == 0):
                        m.d.sync += [got[q].eq(1), val[q].eq(fab.i[q].payload.as_value())]
                    with m.Else():
                        m.d.sync += cnt[q].eq(cnt[q] - 1)
        with m.Elif(AnySeq(1)):
            # the beat after everything any input of the flow has accepted (this cycle included)
            top = _max([nxt[q] for q in ins])
            m.d.sync += [trk.eq(1), ahead.eq(top)]
            for q in ins:
                m.d.sync += [got[q].eq(0), cnt[q].eq(top - nxt[q])]
        # helper invariants
        for q in ins:
            diff = self.diffs[(i, q, p)]
            m.d.comb += [
                Assert(~trk | got[q] | (cnt[q] + diff == ahead),
                       f"o{p}: input {q} has accepted everything before the picked beat"),
                Assert(~(trk & got[q]) | (ahead < diff), f"o{p}: picked beat of input {q} in flight"),
            ]
            before = Const(0, range(cap + 2))
            for v, d, key in self.queues[(i, q, p)]:
                qs = self.summed[(i, p, key)]
                here = trk & got[q] & v & (before == ahead)
                m.d.comb += Assert(~here | ((d == total(qs)) & _all(got[x] for x in qs)),
                                   f"o{p}: picked beat held in place with its value")
                before = before + v


def _all(sigs):
    out = Const(1, 1)
    for s in sigs:
        out = out & s
    return out


def _max(values):
    top = values[0]
    for v in values[1:]:
        top = Mux(v > top, v, top)
    return top


def _lane_sum(vals, width, lanes):
    """Lane-wise wrapping sum of the payloads ``vals``."""
    lanes_out = []
    for k in range(lanes):
        acc = vals[0][k * width:(k + 1) * width]
        for v in vals[1:]:
            acc = (acc + v[k * width:(k + 1) * width])[:width]
        lanes_out.append(acc)
    return Cat(*lanes_out)
