"""cocotb bench that exercises sim/benches/streams.py on a stream FIFO (tests/sim/test_streams.py)."""

import random

import cocotb

from .streams import PauseGenerator, StreamDriver, StreamMonitor, start, watchdog
from fred.sim.toolchain import bench_config


@cocotb.test()
async def fifo_passes_everything_in_order(dut):
    cfg = bench_config()
    rng = random.Random(int(cocotb.RANDOM_SEED))
    cycles = await start(dut)
    cocotb.start_soon(watchdog(dut.clk, 20_000, "fifo self-test"))
    drv = StreamDriver(dut, "i", dut.clk, cycles, PauseGenerator(cfg["idle"], random.Random(rng.random())))
    mon = StreamMonitor(dut, "o", dut.clk, cycles, PauseGenerator(cfg["stall"], random.Random(rng.random())))
    data = [rng.randrange(1 << 16) for _ in range(cfg["n"])]
    drv.send(data)
    while len(mon.beats) < len(data):
        await cocotb.triggers.RisingEdge(dut.clk)
    got = [p for _, p in mon.beats]
    if cfg.get("expect_corrupt"):
        data[len(data) // 2] ^= 1  # the checker must notice a mismatch
    assert got == data
    if cfg["idle"] == 0 and cfg["stall"] == 0:
        first, last = mon.beats[0][0], mon.beats[-1][0]
        assert last - first == len(data) - 1, f"not one beat per cycle: {last - first + 1} cycles"
