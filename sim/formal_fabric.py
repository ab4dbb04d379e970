"""Formal harness of a small FRED_m(P) fabric configured for one set of flows, for SymbiYosys.

:class:`FabricHarness` drives every input (``valid``, ``payload``) and every output ``ready``
from free signals, sets ``cfg`` to the routing of ``flows`` (:func:`fred.hdl.routing.route`,
:func:`fred.hdl.fabric.config_bits`) and asserts one group:

``stream``
    every output holds ``valid`` and ``payload`` until taken.

Fabric routing and beat conservation are not checked formally yet (docs/formal.md).
"""

from __future__ import annotations

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Elaboratable, Module, Signal

from fred.hdl.fabric import Fabric, config_bits
from fred.hdl.flows import parse_flow
from fred.hdl.routing import route

__all__ = ["FabricHarness", "FABRIC_GROUPS"]

FABRIC_GROUPS = ("stream",)


class FabricHarness(Elaboratable):
    """FRED_``middle``(``ports``) of ``lanes`` x ``dtype`` routing ``flows`` (a list of flow
    texts such as ``"0-3>0"``) with the assertions of ``group``."""

    def __init__(self, ports, middle, lanes, dtype, flows, group, *, fault=None):
        if group not in FABRIC_GROUPS:
            self._MustUse__silence = True
            raise ValueError(f"unknown property group {group!r}; known: {', '.join(FABRIC_GROUPS)}")
        self.flows = [parse_flow(f) for f in flows]
        self.group = group
        self.fabric = Fabric(ports, middle, lanes, dtype, fault=fault)
        self.cfg = config_bits(ports, middle, route(ports, middle, self.flows))

    def elaborate(self, platform):
        m = Module()
        m.submodules.fabric = fab = self.fabric
        m.d.comb += fab.cfg.eq(self.cfg)
        W = len(fab.i[0].payload.as_value())
        for p in fab.i:
            m.d.comb += [p.valid.eq(AnySeq(1)), p.payload.as_value().eq(AnySeq(W))]
        for p in fab.o:
            m.d.comb += p.ready.eq(AnySeq(1))
        if self.group == "stream":
            for j, o in enumerate(fab.o):
                held = Signal(name=f"o{j}_held")
                last = Signal(W, name=f"o{j}_last")
                m.d.sync += [held.eq(o.valid & ~o.ready), last.eq(o.payload.as_value())]
                with m.If(held):
                    m.d.comb += Assert(o.valid & (o.payload.as_value() == last),
                                       f"o{j} holds valid and payload until taken")
        return m
