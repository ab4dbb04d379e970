"""The shared stream driver/monitor move every beat, in order, at full rate, and can fail."""

import pytest
from amaranth import Module
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from fred.hdl.verilog import emit
from fred.sim.toolchain import run_bench


class _Fifo(wiring.Component):
    i: In(stream.Signature(16))
    o: Out(stream.Signature(16))

    def elaborate(self, platform):
        m = Module()
        m.submodules.f = f = fifo.SyncFIFOBuffered(width=16, depth=4)
        m.d.comb += [f.w_data.eq(self.i.payload), f.w_en.eq(self.i.valid), self.i.ready.eq(f.w_rdy),
                     self.o.payload.eq(f.r_data), self.o.valid.eq(f.r_rdy), f.r_en.eq(self.o.ready)]
        return m


@pytest.mark.parametrize("idle,stall", [(0.0, 0.0), (0.5, 0.5), (0.1, 0.9)])
def test_streams_on_fifo(idle, stall):
    run_bench(verilog=emit(_Fifo(), "fifo"), toplevel="fifo", test_module="fred.sim.benches.streams_selftest",
              tag="streams-fifo", config={"n": 500, "idle": idle, "stall": stall}, seed=7)


def test_streams_checker_can_fail():
    with pytest.raises(AssertionError, match="cocotb tests failed"):
        run_bench(verilog=emit(_Fifo(), "fifo"), toplevel="fifo", test_module="fred.sim.benches.streams_selftest",
                  tag="streams-fifo", config={"n": 100, "idle": 0.0, "stall": 0.0, "expect_corrupt": True}, seed=7)
