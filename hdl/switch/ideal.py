"""An ideal flow fabric with the FRED fabric's interface, for testing the switch on its own.

``IdealFabric(ports, lanes, width)`` has the interface the switch expects of
:class:`fred.hdl.fabric.recursive.Fabric`: ``i``/``o`` arrays of streams of ``ArrayLayout(width, lanes)``,
``cfg`` and ``latency``. Its configuration is ``P * P`` bits: bits ``q*P .. q*P+P-1`` are the
input ports summed into output ``q`` (0 = output unused). Flows must be disjoint. Each flow joins
all its inputs and forks to all its outputs through one register per output (``latency`` = 1);
lanes are added as unsigned integers modulo ``2**width`` (exact for int32; for float types this
is *not* the FRED fabric's arithmetic -- use it only with int32 data).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["IdealFabric", "ideal_config_bits"]


def ideal_config_bits(ports: int, flows) -> int:
    cfg = 0
    for f in flows:
        mask = 0
        for p in f.inputs:
            mask |= 1 << p
        for q in f.outputs:
            cfg |= mask << (q * ports)
    return cfg


class IdealFabric(wiring.Component):
    def __init__(self, ports: int, lanes: int, width: int):
        self.P, self.lanes, self.width = ports, lanes, width
        self.latency = 1
        self.config_width = ports * ports
        S = stream.Signature(data.ArrayLayout(width, lanes))
        super().__init__({
            "i": In(S).array(ports),
            "o": Out(S).array(ports),
            "cfg": In(ports * ports),
        })

    def elaborate(self, platform):
        m = Module()
        P, W = self.P, self.width
        masks = [self.cfg[q * P:(q + 1) * P] for q in range(P)]
        free = [Signal(name=f"free{q}") for q in range(P)]
        can = [Signal(name=f"can{q}") for q in range(P)]
        fire_in = [Signal(name=f"fire_in{p}") for p in range(P)]
        regv = [Signal(name=f"regv{q}") for q in range(P)]
        regd = [Signal(W * self.lanes, name=f"regd{q}") for q in range(P)]
        for q in range(P):
            allv = 1
            for p in range(P):
                allv = allv & (~masks[q][p] | self.i[p].valid)
            m.d.comb += [free[q].eq(~regv[q] | self.o[q].ready),
                         can[q].eq((masks[q] != 0) & free[q] & allv)]
        for p in range(P):
            used = 0
            ok = 1
            for q in range(P):
                used = used | masks[q][p]
                ok = ok & (~masks[q][p] | can[q])
            m.d.comb += [fire_in[p].eq(used & ok), self.i[p].ready.eq(fire_in[p])]
        for q in range(P):
            load = masks[q] != 0
            for p in range(P):
                load = load & (~masks[q][p] | fire_in[p])
            lanes_sum = []
            for k in range(self.lanes):
                acc = 0
                for p in range(P):
                    lane = self.i[p].payload.as_value()[k * W:(k + 1) * W]
                    acc = (acc + Mux(masks[q][p], lane, 0))[:W]
                lanes_sum.append(acc)
            from amaranth.hdl import Cat
            with m.If(load):
                m.d.sync += [regv[q].eq(1), regd[q].eq(Cat(*lanes_sum))]
            with m.Elif(self.o[q].ready):
                m.d.sync += regv[q].eq(0)
            m.d.comb += [self.o[q].valid.eq(regv[q]), self.o[q].payload.eq(regd[q])]
        return m
