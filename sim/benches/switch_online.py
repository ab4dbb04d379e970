"""cocotb bench: throughput of online routing against a precompiled phase (sim/characterize/switch.py).

``switch_throughput`` (configuration from :func:`fred.sim.characterize.switch.measure_online`): every
input port sends ``packets`` packets of ``length`` data flits back to back (no idle cycles, the
receivers always ready with ample credits). ``mode``:

* ``table`` -- one phase of the table routes the permutation ``perm`` (flows ``{p} -> {perm[p]}``),
  every packet carries that phase's index;
* ``online`` -- the same permutation with default-index packets (port byte ``perm[p]``), routed
  on the fly;
* ``online-a2a`` -- default-index all-to-all: each input sends one packet to every output per
  exchange (a random order per input), ``packets // ports`` exchanges.

Every packet is checked against the golden model as it is delivered (:class:`Bench.expect`).
The result (JSON at ``out``): ``cycles`` from the first header accepted at an input to the last
flit delivered, ``flits`` delivered (headers included), ``flits_per_cycle_per_port`` (1 = every
link busy every cycle) and ``payload_per_cycle_per_port`` (data flits only), ``rounds``.

Also ``switch_a2a``: an all-to-all through the switch, precompiled or online (sim/characterize/all_to_all.py).

``switch_a2a`` (configuration from :func:`fred.sim.characterize.all_to_all.run_a2a`): every input port sends
its packets of the all-to-all, ``length`` data flits each, as fast as its credits allow, in the
order ``cfg["order"][p]`` gives: a list of ``[phase, destination]`` where ``phase`` is a
phase-table index (a precompiled phase of :func:`fred.hdl.routing.all_to_all.compile_all_to_all`; the
k-th packet of a phase carries ``seq`` k at every input) or ``null`` (a default-index packet
naming ``destination``, routed online). ``stall`` gives the receivers random back-pressure.

Checks: every packet against the golden model as it is delivered (:class:`Bench.expect`: per
table phase and output, per online stream, in order, data bit-exact); at the end, per (source,
destination) pair, the packets delivered are exactly the ones sent, once, in the order sent
(the source of a table-phase packet is the phase's input for that output; of an online one, its
port byte); no counter of dropped packets moved.

Result (JSON at ``out``): ``cycles`` from the first header accepted at an input to the last flit
delivered, ``flits`` delivered (headers included), ``flits_per_cycle_per_port``,
``busiest_flits`` (the busiest input's or output's flits) and ``fraction_of_bound``
(= busiest_flits / cycles), ``rounds`` started, ``phase_changes`` (rounds whose phase differs
from the previous round's), ``phase_change_idle_cycles`` ``{mean, max, samples}``: at every
output, the idle cycles between the last flit of one table phase's packet and the header of
the next phase's (0 = back to back).
"""

from __future__ import annotations

import json
import random

import cocotb
from cocotb.triggers import RisingEdge

from fred.contract import packet as pk
from fred.sim.golden import Offered, SwitchModel, make_online_traffic, phases_from_json
from .streams import start, watchdog
from .switch_harness import Bench
from fred.sim.toolchain import bench_config

__all__ = ["perm_traffic"]


def perm_traffic(P, perm, rng, *, packets, length, flit_bits, online):
    """Per port ``packets`` packets of phase 0 (``online`` False) or of the default index naming
    ``perm[p]``, ``length`` data flits each."""
    offered = {p: Offered() for p in range(P)}
    for p in range(P):
        for k in range(packets):
            data = tuple(rng.randrange(1 << flit_bits) for _ in range(length))
            h = (pk.Header.data(pk.VC_DP, pk.DEFAULT_PHASE, k, length, port=perm[p]) if online
                 else pk.Header.data(pk.VC_DP, 0, k, length))
            x = pk.Packet(h, data)
            offered[p].items.append(("data", pk.pack(x, flit_bits), x))
    return offered


@cocotb.test()
async def switch_throughput(dut):
    cfg = bench_config()
    rng = random.Random(int(cocotb.RANDOM_SEED))
    cycles = await start(dut)
    cocotb.start_soon(watchdog(dut.clk, cfg.get("max_cycles", 400_000), "switch throughput"))
    b = Bench(dut, cfg, rng, cycles)
    phases = phases_from_json(cfg["phases"])
    model = SwitchModel(cfg["ports"], cfg["middle"], cfg["lanes"], cfg["dtype"], phases,
                        fabric=cfg["fabric"], max_len=cfg["max_len"])
    await b.load_table(cfg["cfg_words"])
    P, L, n = b.P, cfg["length"], cfg["packets"]
    if cfg["mode"] == "online-a2a":
        offered = make_online_traffic(P, rng, pattern="a2a", rounds=max(1, n // P),
                                      flit_bits=b.flit_bits, max_len=L, length=L)
    else:
        offered = perm_traffic(P, cfg["perm"], rng, packets=n, length=L, flit_bits=b.flit_bits,
                               online=cfg["mode"] == "online")
    exp = model.expected(offered)
    b.expect(exp.data, exp.ctrl)
    cocotb.start_soon(b.watch_rounds())
    b.start_sinks(grant_now=True)
    b.start_sources(offered)
    want = exp.flits()
    while any(len(b.monitors[q].beats) < want.get(q, 0) for q in range(P)):
        await RisingEdge(dut.clk)
        b.raise_errors()
    t0 = min(b.drivers[p].sent[0][0] for p in range(P) if b.drivers[p].sent)
    t1 = max(m.beats[-1][0] for m in b.monitors.values() if m.beats)
    flits = sum(want.values())
    data = sum(len(x.data) for pkts in exp.data.values() for x in pkts)
    res = {"mode": cfg["mode"], "cycles": t1 - t0 + 1, "flits": flits, "rounds": len(b.events),
           "flits_per_cycle_per_port": round(flits / (t1 - t0 + 1) / P, 4),
           "payload_per_cycle_per_port": round(data / (t1 - t0 + 1) / P, 4)}
    dut._log.info(f"switch throughput: {res}")
    with open(cfg["out"], "w") as f:
        json.dump(res, f)
