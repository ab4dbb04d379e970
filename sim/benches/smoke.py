"""cocotb bench for the toolchain smoke test: a one-stage registered adder."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from fred.sim.toolchain import bench_config


@cocotb.test()
async def registered_add(dut):
    cfg = bench_config()
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    for i in range(cfg.get("n", 20)):
        dut.a.value = i
        dut.b.value = 3 * i
        await RisingEdge(dut.clk)
        await ReadOnly()
        assert int(dut.y.value) == (4 * i + cfg.get("bias", 0)) & 0xFF, (i, int(dut.y.value))
        await FallingEdge(dut.clk)
