"""Verilator regression of the whole FRED switch (sim/benches/switch.py) with the FRED fabric."""

import os

import pytest

from fred.contract import packet as pk
from fred.hdl.netlist.flows import Flow
from fred.sim.golden.switch import phases_to_json
from fred.sim.toolchain import run_bench

PHASES4 = {
    0: (pk.VC_DP, [Flow({0, 1, 2, 3}, {0, 1, 2, 3})]),
    1: (pk.VC_DP, [Flow({0, 1}, {2}), Flow({2, 3}, {3})]),
    2: (pk.VC_MP, [Flow({0, 1}, {0, 1}), Flow({2, 3}, {2, 3})]),
    3: (pk.VC_PP, [Flow({0}, {2}), Flow({1}, {3}), Flow({2}, {0, 1})]),
    4: (pk.VC_PP, [Flow({3}, {1})]),
}
PHASES5 = {
    0: (pk.VC_DP, [Flow({0, 1, 2, 3, 4}, {0, 1, 2, 3, 4})]),
    1: (pk.VC_MP, [Flow({0, 1}, {0, 1}), Flow({2, 3, 4}, {2, 3, 4})]),
    2: (pk.VC_PP, [Flow({4}, {0, 1}), Flow({0}, {4}), Flow({2}, {3})]),
    3: (pk.VC_MP, [Flow({3, 4}, {3})]),
    5: (pk.VC_DP, [Flow({1}, {2})]),
}


def build(P=4, lanes=2, dtype="int32", fabric="fred", depth=12, ctrl_depth=2, max_len=4,
          entries=8, fault=None):
    from fred.hdl.switch.top import Switch
    from fred.hdl.verilog import emit
    sw = Switch(P, 3, lanes, dtype, data_depth=depth, ctrl_depth=ctrl_depth, max_len=max_len,
                table_entries=entries, fabric=fabric, out_credits=(0, 0, 0, 0), fault=fault)
    return sw, emit(sw, "fred_switch")


_CACHE = {}


def bench_config(P=4, lanes=2, dtype="int32", fabric="fred", phases=None, fault=None, **kw):
    key = (P, lanes, dtype, fabric, fault)
    if key not in _CACHE:
        _CACHE[key] = build(P, lanes, dtype, fabric, fault=fault)
    sw, verilog = _CACHE[key]
    phases = phases or (PHASES4 if P == 4 else PHASES5)
    L = sw.layout
    bad_cfg = [
        L.cfg_word(sw.capacity + 1, sw.table_entry(pk.VC_DP, [Flow({0}, {1})])),  # out of range
        L.cfg_word(pk.DEFAULT_PHASE, sw.table_entry(pk.VC_DP, [Flow({0}, {1})])),  # reserved
        L.cfg_word(6, sw.table_entry(pk.VC_DP, [Flow({0}, {1})]) | pk.VC_CTRL),   # CTRL VC
        L.cfg_word(6, 1),                                                          # empty masks
    ]
    cfg = {
        "ports": P, "middle": 3, "lanes": lanes, "dtype": dtype, "fabric": sw.fabric_kind,
        "depths": list(sw.depths), "max_len": sw.max_len, "credit_bits": sw.credit_bits, "fseq_bits": sw.fseq_bits,
        "phases": phases_to_json(phases), "cfg_words": sw.cfg_words(phases),
        "bad_cfg_words": bad_cfg, "unknown_phase": 7,
        "rounds": 12, "ctrl_rate": 0.3, "bad_rate": 0.2, "skew": 40, "idle": 0.2, "stall": 0.3,
        "rx_credits": [8, 8, 8, 2], "credit_delay": 12, "starve": 0.01, "starve_len": 60,
        "bound": 4000, "max_cycles": 60_000,
    }
    cfg.update(kw)
    return verilog, cfg


def run(testcase, seed, fault=None, **kw):
    verilog, cfg = bench_config(fault=fault, **kw)
    tag = f"switch-p{cfg['ports']}-{cfg['dtype']}-{cfg['fabric']}" + (f"-{fault}" if fault else "")
    return run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.benches.switch",
                     tag=tag, config=cfg, seed=seed, testcase=testcase)


def test_switch_lint_clean():
    from fred.sim.lint import lint
    verilog, _ = bench_config(P=4)
    assert lint(verilog, "fred_switch") == []


def test_switch_random_p4():
    run("switch_random", 1, P=4)


def test_switch_priority_p4():
    run("switch_priority", 2, P=4, rounds=2, ctrl_rate=0.0, bad_rate=0.0,
        rx_credits=[120, 120, 120, 4], credit_burst=31, starve=0.0)


@pytest.mark.regress
def test_switch_random_p5():
    """Table phases on FRED_3(5) (odd: the demux/mux port too). make regress: one more switch
    build (~50 s of CPU with the run, measured); make test checks the 5-port control under
    amaranth.sim (tests/sim/test_switch_online.py::test_switch_routes_default_index_online[*-5],
    online routing at 5 ports), the FRED_3(5) fabric bit-exact on the compiled path
    (tests/sim/test_fabric_sim.py::test_fabric_random_flows_subset[P5-m3-fp32], line rate and
    latency) and on the hierarchical form (tests/hdl/test_hier.py), the router for FRED_3(5)
    symbolically (tests/sim/test_switch_online.py::test_greedy_routes_every_partial_permutation),
    and the bench itself on the 4-port switch."""
    run("switch_random", 3, P=5, rounds=10)


# -- online routing of the default index (issue 14): against the golden model ----------------------
def test_switch_online_permutations_p4():
    """Random permutations of default-index packets, routed online through FRED_3(4)."""
    run("switch_random", 6, P=4, online_pattern="perm", rounds=8, bad_rate=0.0, ctrl_rate=0.0)


@pytest.mark.regress
def test_switch_online_all_to_all_p5():
    """All-to-all default-index traffic on FRED_3(5) (odd: the demux/mux port too); make regress,
    as test_switch_random_p5."""
    run("switch_random", 7, P=5, online_pattern="a2a", rounds=2, bad_rate=0.0, ctrl_rate=0.0)


@pytest.mark.regress
def test_switch_online_mixed_p5():
    """Online packets and ACK/NACKs mixed into the random table-phase traffic, bad packets too;
    make regress, as test_switch_random_p5 (the mix at 4 ports under amaranth.sim:
    tests/sim/test_switch_online.py::test_online_rounds_share_a_vc_with_table_phases)."""
    run("switch_random", 8, P=5, rounds=10, online_rate=0.5)


@pytest.mark.regress
@pytest.mark.parametrize("seed", range(40, 44))
@pytest.mark.parametrize("P", [4, 5])
def test_switch_online_soak(P, seed):
    run("switch_random", seed, P=P, rounds=40, online_rate=0.5, max_cycles=400_000, bound=20_000)
    run("switch_random", seed, P=P, online_pattern="a2a" if seed % 2 else "perm", rounds=12,
        bad_rate=0.0, ctrl_rate=0.0, max_cycles=400_000, bound=20_000)


@pytest.mark.regress
@pytest.mark.parametrize("seed", [4, 5])
def test_switch_random_p5_fp16(seed):
    run("switch_random", seed, P=5, lanes=4, dtype="fp16", rounds=20, max_cycles=200_000)


# -- real fault mutants: each one must make the bench fail ----------------------------------------
def _caught(testcase, fault, **kw):
    with pytest.raises(AssertionError, match="cocotb tests failed"):
        run(testcase, 1, P=4, fault=fault, **kw)


@pytest.mark.regress
def test_switch_header_off_by_one_caught():
    """Output headers with phase index + 1: the per-packet scoreboard fails at the first one.
    make regress-switch, as is its compiled twin
    (tests/sim/test_switch_soak.py::test_switch_soak_catches_a_wrong_header, the same Verilog of
    the same mutant): make test builds no mutant switch (a 4-port switch build is about 30 s of
    CPU with an empty build cache)."""
    _caught("switch_random", "header-off-by-one", rounds=3)


@pytest.mark.regress
def test_switch_credit_twice_caught():
    """Input port 0 returns one credit twice: the source holds more credits than the buffer."""
    _caught("switch_random", "credit-twice", rounds=3)


@pytest.mark.regress
def test_switch_prio_reversed_caught():
    """DP > PP > MP between rounds: the strict-priority checks fail."""
    _caught("switch_priority", "prio-reversed", rounds=2, ctrl_rate=0.0, bad_rate=0.0,
            rx_credits=[120, 120, 120, 4], credit_burst=31, starve=0.0)


@pytest.mark.regress
@pytest.mark.parametrize("seed", range(10, 16))
@pytest.mark.parametrize("P", [4, 5])
def test_switch_soak(P, seed):
    run("switch_random", seed, P=P, rounds=60, max_cycles=400_000, bound=20_000)


@pytest.mark.regress
@pytest.mark.parametrize("seed", range(20, 24))
def test_switch_priority_soak(seed):
    run("switch_priority", seed, P=5, rounds=2, ctrl_rate=0.0, bad_rate=0.0,
        rx_credits=[120, 120, 120, 4], credit_burst=31, starve=0.0)


# -- the measured switch (sim/characterize/switch.py): fabric cells as shared modules -----------------
PHASES12 = {
    0: (pk.VC_DP, [Flow(set(range(12)), set(range(12)))]),
    1: (pk.VC_MP, [Flow(set(range(6)), set(range(6))), Flow(set(range(6, 12)), set(range(6, 12)))]),
    2: (pk.VC_PP, [Flow({p}, {(p + 5) % 12}) for p in range(12)]),
    3: (pk.VC_MP, [Flow({0, 4, 8}, {1}), Flow({2, 6, 10}, {3, 7, 11})]),
    5: (pk.VC_DP, [Flow({1}, {2, 5, 9})]),
}


def test_measure_switch_params():
    from fred.sim.characterize.switch import activation_samples_for, check_params, data_depth_for
    assert data_depth_for(4) == 12 and data_depth_for(8) == 24
    assert check_params(12, 8) == 24 and check_params(4, 4) == 12
    assert activation_samples_for(4) == 6 and activation_samples_for(12) == 22
    for args, needle in (((3, 4), "ports 3"), ((12, 0), "length 0"), ((12, 8, 17), "data_depth 17")):
        with pytest.raises(ValueError, match=needle):
            check_params(*args)


@pytest.mark.regress
def test_measure_switch_shared_equals_flat():
    """Shared cell modules are the same circuit: every figure is identical (P = 4)."""
    from fred.sim.characterize.switch import measure_switch
    a = measure_switch(ports=4, shared=True)
    b = measure_switch(ports=4, shared=False)
    for r in (a, b):
        r.pop("runtime_s")
    assert a == b


@pytest.mark.regress
@pytest.mark.parametrize("seed", [30, 31])
def test_switch_random_p12_fp16(seed):
    """The wafer's 12-port switch (FRED_3(12)), 8-flit packets, against the golden model; the
    build is the one `fred characterize` measures (sim/characterize/switch.py, shared cells)."""
    from fred.sim.characterize.switch import _build
    verilog, sw = _build(12, 3, 4, "fp16", "fred", depth=24, ctrl_depth=2, max_len=8, shared=True)
    cfg = {
        "ports": 12, "middle": 3, "lanes": 4, "dtype": "fp16", "fabric": sw.fabric_kind,
        "depths": list(sw.depths), "max_len": sw.max_len, "credit_bits": sw.credit_bits, "fseq_bits": sw.fseq_bits,
        "phases": phases_to_json(PHASES12), "cfg_words": sw.cfg_words(PHASES12),
        "unknown_phase": 7, "rounds": 10, "ctrl_rate": 0.3, "bad_rate": 0.2, "skew": 40,
        "idle": 0.2, "stall": 0.3, "rx_credits": [12, 12, 12, 2], "credit_delay": 12,
        "starve": 0.01, "starve_len": 60, "bound": 20_000, "max_cycles": 400_000,
    }
    run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.benches.switch",
              tag="switch-p12-fp16-fred", config=cfg, seed=seed, testcase="switch_random")


@pytest.mark.regress
def test_switch_lint_clean_at_any_table_capacity():
    """A phase table whose capacity is not a power of two (the 12-port switch at 256 fp16 lanes
    holds 20 entries) still gives complete cases: every index value has an entry. The table does
    not depend on the datapath: the bench's 2 x int32 switch (linted in 3 s, 4 x fp16 in 5 s).
    make regress-switch; make test lints the default capacity (test_switch_lint_clean)."""
    from fred.hdl.switch.top import Switch
    from fred.hdl.verilog import emit
    from fred.sim.lint import lint

    sw = Switch(4, 3, 2, "int32", data_depth=12, ctrl_depth=2, max_len=4, table_entries=5)
    assert lint(emit(sw, "fred_switch"), "fred_switch") == []
