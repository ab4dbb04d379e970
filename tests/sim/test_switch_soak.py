"""The switch on the compiled path (sim/compiled/harness.cpp, sim/compiled/, sim/soak/switch.py, sim/compiled/world.py).

* the replay soak: golden-model traffic of every kind (table phases with control and malformed
  packets, online routing, permutations, all-to-all) bit-exact on the 4-port switch, and the
  checks can fail (a broken switch, a hang);
* the lockstep benches give the same figures on the compiled switch as under cocotb for the
  same seed: the fault bench with faults of every kind, the switch measurement and the
  all-to-all (precompiled phases with an online tail, receivers stalling); the all-to-all's
  per-pair check can fail.
"""

import os

import numpy as np
import pytest

from fred.contract import packet as pk
from fred.contract.link import LinkSender
from fred.sim.characterize.switch import _build
from fred.sim.compiled import BenchFailure
from fred.sim.soak import default_phases, load_table, parse_replay, replay_stimulus, switch_soak
from fred.sim.compiled.loader import load, port_map
from fred.sim.toolchain import bench_seed

REGRESS = bool(os.environ.get("FRED_REGRESS"))


def _switch(fault=None):
    v, sw = _build(4, 3, 2, "int32", "fred", fault=fault)
    return load(v, sw, "switch-p4-int32-fred" + (f"-{fault}" if fault else "")), sw


def test_port_map_of_the_switch():
    v, sw = _build(4, 3, 2, "int32", "fred")
    pm = port_map(v, "fred_switch")
    ins, outs = dict(pm.inputs), dict(pm.outputs)
    wire = pk.WireFormat(sw.flit_bits, sw.fseq_bits).width
    assert ins["i__3__payload"] == outs["o__0__payload"] == wire
    assert ins["credit_i__0"] == outs["credit_o__2"] == 4 * sw.credit_bits
    assert "clk" not in ins and ins["rst"] == 1 and outs["round_start"] == 1
    # each port padded to whole words, in name order
    assert pm.in_words == sum((b + 31) // 32 for _, b in pm.inputs)


def test_replay_stimulus_layout():
    words = [[0x10, 0x5678 | 1 << 64], [0x30 | 1 << 64]]    # head words carry the VC in bits 4..5
    s = replay_stimulus([words, []], [3, 0], ww=4, idle=0.5, stall=0.0, credit_delay=3,
                        credit_burst=2, drain=9, budget=100, rx_credits=(1, 2, 3, 4),
                        depths=(12, 12, 12, 2))
    assert list(s[:14]) == [1 << 31, 0, 3, 2, 9, 100, 1, 2, 3, 4, 12, 12, 12, 2]
    assert list(s[14:16]) == [2, 3]                          # port 0: 2 packets, 3 words due
    assert list(s[16:18]) == [1, 2] and list(s[18:26]) == [0x10, 0, 0, 0, 0x5678, 0, 1, 0]
    assert list(s[26:28]) == [3, 1]                          # the second packet: VC 3
    assert list(s[-2:]) == [0, 0]                            # port 1: nothing
    with pytest.raises(ValueError, match="pause probability"):
        replay_stimulus([[]], [0], ww=4, idle=1.0, stall=0, credit_delay=1, credit_burst=1,
                        drain=1, budget=1, rx_credits=(0,) * 4, depths=(0,) * 4)


def test_parse_replay_layout():
    P, ww = 2, 1
    res = np.array([0, 50, 1, 0, 0,                  # status, cycles, rounds, stream rule
                    1, 7, 0xAB, 0,                   # output 0: one word at cycle 7; output 1: none
                    1, 0, 5, 0,                      # input 0: packet 0 done at 5; input 1: none
                    9, 2, 3, 4,                      # a round start
                    42], np.uint32)
    r = parse_replay(res, P, ww)
    assert (r.status, r.cycles, r.words, r.sent, r.rounds) == (0, 50, [[(7, 0xAB)], []], [{0: 5}, {}],
                                                              [(9, 2, 3, 4)])
    assert list(r.outv) == [42]


def test_switch_soak_every_traffic_kind():
    m, sw = _switch()
    rep = switch_soak(m, sw, default_phases(4), batches=4, rounds=16, seed=bench_seed(5),
                      traffic=("table", "online", "perm", "a2a"))
    print(rep.table())
    assert rep.batches == 4 and rep.packets > 300 and rep.rounds > 100
    assert rep.cycles > rep.flits // 4 > 0 and rep.sim_rate > 0
    assert rep.peak["CTRL"] >= 1 and max(rep.peak.values()) <= max(sw.depths)


def test_switch_soak_detects_a_hang():
    m, sw = _switch()
    ph = default_phases(4)
    load_table(m, sw.cfg_words(ph))
    words = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 3, 0, 1), (5,)), sw.flit_bits)
    sealed = [[], [LinkSender(pk.WireFormat(sw.flit_bits, sw.fseq_bits)).seal_packet(words)], [], []]
    # one packet multicast from port 1 (phase 3), but 5 words expected at output 0: never
    # complete, the budget ends the run (before the switch's idle probes, probe_idle cycles)
    assert sw.probe_idle > 200
    ww = m.ino["i__0__payload"][1]
    stim = replay_stimulus(sealed, [5, 2, 2, 2], ww=ww, idle=0, stall=0, credit_delay=1,
                           credit_burst=2, drain=10, budget=200, rx_credits=(8, 8, 8, 8),
                           depths=sw.depths)
    r = parse_replay(m.replay(stim, 1, 100_000)[0], 4, ww)
    assert r.status == 1 and r.cycles == 201
    assert [len(w) for w in r.words] == [2, 0, 2, 2] and list(r.sent[1]) == [0] and not r.sent[0]


@pytest.mark.regress
def test_switch_soak_catches_a_wrong_header():
    """make regress-switch, with the cocotb benches' tests of the same mutant
    (tests/sim/test_switch_bench.py, tests/model/test_model_vs_rtl_overlap.py): its build is a
    second 4-port switch."""
    m, sw = _switch("header-off-by-one")
    with pytest.raises(BenchFailure, match="header|unexpected|stream|packets"):
        switch_soak(m, sw, default_phases(4), batches=1, rounds=8, seed=3, traffic=("table",))


@pytest.mark.skipif(not REGRESS, reason="make regress")
# credit-twice: the sources then overfill the buffer and the switch stalls; the replay has no
# per-cycle credit check (the lockstep and cocotb benches have), its watchdog ends the batch
@pytest.mark.parametrize("fault,needle", [("prio-reversed", "was ready"), ("credit-twice", "a hang")])
def test_switch_soak_catches_broken_switches(fault, needle):
    m, sw = _switch(fault)
    with pytest.raises(BenchFailure, match=needle):
        switch_soak(m, sw, default_phases(4), batches=8, rounds=24, seed=3,
                    traffic=("table", "online"), idle=0.0, stall=0.5)


def _same(a, b):
    a, b = dict(a), dict(b)
    a.pop("runtime_s"), b.pop("runtime_s")
    assert a == b


def test_fault_bench_compiled_equals_cocotb():
    """Faults of every kind on every link: the same retransmissions, counters and goodput."""
    from fred.sim.characterize.faults import run_faults

    kw = dict(ports=4, rates=(2e-2,), packets=16, seed=3)
    a = run_faults(backend="compiled", **kw)
    assert a["check"] == "pass" and a["runs"][0]["retransmissions"] > 0, a
    _same(a, run_faults(backend="cocotb", **kw))


def test_measure_switch_compiled_equals_cocotb():
    """The switch characterization figures (activation, first data, phase switch, preemption,
    peak occupancy and the stress run) are the same on both simulators."""
    from fred.sim.characterize.switch import measure_switch

    kw = dict(ports=4, preemptions=6, stress_rounds=6, seed=2)
    a = measure_switch(backend="compiled", **kw)
    assert a["preemption_cycles"]["samples"] == 6 and a["stress"]["rounds"] == 18
    _same(a, measure_switch(backend="cocotb", **kw))


def _a2a_schedule():
    import random

    from fred.hdl.routing import compile_all_to_all, zipf_matrix

    sched = compile_all_to_all(zipf_matrix(4, 24, 1.0, random.Random(6)), 2)
    assert len(sched.phases) == 2 and sum(map(sum, sched.online)) > 0
    return sched


def test_all_to_all_compiled_equals_cocotb():
    """A skewed all-to-all, two phases from the table and the rest online, receivers stalling
    30 % of cycles: every packet checked on both simulators, the same figures. On the switch of
    test_measure_switch_compiled_equals_cocotb (2 x int32 lanes, 4-flit packets, 8 table
    entries): the same Verilog, so no build of its own on either simulator."""
    from fred.sim.characterize.all_to_all import run_a2a

    kw = dict(seed=6, length=4, stall=0.3, lanes=2, dtype="int32", table_entries=8)
    a = run_a2a(4, _a2a_schedule(), backend="compiled", **kw)
    assert a["phase_changes"] > 0 and a["flits"] == 4 * 24 * 5, a
    assert a == run_a2a(4, _a2a_schedule(), backend="cocotb", **kw)


def test_all_to_all_pair_check_fails_on_a_reordered_pair(monkeypatch):
    """The per-(source, destination) check: the switch delivers what the golden model expects,
    but the bench's record of what was sent has two packets of one pair swapped: it fails
    naming the pair."""
    from fred.sim.characterize.all_to_all import run_a2a
    from fred.sim.compiled import scenarios

    real = scenarios.a2a_offered

    def swapped(*args, **kw):
        offered, sent = real(*args, **kw)
        pair = next(k for k, v in sorted(sent.items()) if len(v) > 1)
        sent[pair][0], sent[pair][1] = sent[pair][1], sent[pair][0]
        return offered, sent

    monkeypatch.setattr(scenarios, "a2a_offered", swapped)
    with pytest.raises(BenchFailure, match=r"pair \d+ -> \d+: .* not the same data in the same order"):
        run_a2a(4, _a2a_schedule(), seed=6, length=4, lanes=2, dtype="int32", table_entries=8)


def test_backend_names_are_checked():
    from fred.sim.characterize.all_to_all import run_a2a
    from fred.sim.characterize.faults import run_faults
    from fred.sim.characterize.switch import measure_switch

    with pytest.raises(ValueError, match="backend 'icarus'"):
        run_a2a(4, _a2a_schedule(), seed=1, length=8, backend="icarus")

    with pytest.raises(ValueError, match="backend 'icarus'"):
        measure_switch(ports=4, backend="icarus")
    with pytest.raises(ValueError, match="backend 'icarus'"):
        run_faults(ports=4, backend="icarus")
