"""Measure the FRED switch in simulation: phase-switch and preemption latency, peak occupancy.

``measure_switch(...) -> dict`` builds the switch (Verilator, cached; the fabric's cells as
shared modules from 8 ports up, see :func:`_build`), runs the measurement scenario and the
random stress bench (for the peak buffer occupancy) of :mod:`fred.sim.compiled.world` -- by
default on the compiled switch (:mod:`fred.sim.compiled.loader`, lockstep), with
``backend="cocotb"`` under cocotb (sim/compiled/cocotb_driver.py; the same figures for the same
seed) -- and returns:

=============================  =================================================================
key                            meaning (all times in switch clock cycles)
=============================  =================================================================
``schema``                     ``"fred-switch-timing/2"`` (2: adds ``cut_through_cycles``)
``params``                     switch parameters (ports, middle, lanes, dtype, depths in flits,
                               max_len = the data flits of *every* measured packet,
                               fabric, fabric_latency, config_settle, ...)
``activation_cycles``          idle switch: last input flit of a round accepted -> its header
                               leaves the output; ``{"new_config", "same_config"}`` (the
                               latter: worst of ``activation_samples`` samples; the scanner
                               position varies). The switch forwards cut-through, so this
                               can be negative (the header leaves before the last flit is in)
``first_data_cycles``          same, to the first *data* flit (adds the fabric latency)
``cut_through_cycles``         the same figures from the *header* of the last input packet
                               (the switch starts a round once every header is in):
                               ``{"activation": {...}, "first_data": {...}, "preemption":
                               {"min", "max", "mean", "samples"}}``; what the timing file's
                               summary uses (schema 3, ``forwarding: cut-through``)
``phase_switch_cycles``        headline: last flit of one round leaves -> header of the next
                               round leaves, next round already buffered, *different phase of
                               the same VC* (new configuration). 1 would be back-to-back.
``phase_switch_detail``        ``{"same_phase", "new_phase_same_vc", "new_vc"}`` for the three
                               kinds of successive rounds
``activation_samples``         idle-switch samples taken (default 2 (P - 1), at least 6)
``preemption_cycles``          a DP phase streams continuously on the low half of the ports; an
                               MP round on the high half becomes complete at the inputs -> its
                               header leaves: ``{"min", "max", "mean", "samples"}`` (includes
                               waiting for the DP round in flight to drain)
``peak_occupancy_flits``       per VC, highest input-buffer occupancy seen in the stress bench
``stress``                     ``{"cycles", "rounds", "worst_round"}`` of the stress bench
``runtime_s``                  wall time of the measurement (builds included)
=============================  =================================================================

The system model uses ``phase_switch_cycles`` where phases follow each other and
``cut_through_cycles["preemption"]["max"]`` where a higher-priority phase interrupts a lower one.

:func:`measure_online` measures online routing (default index 255) against a precompiled phase
doing the same permutation (the ``throughput`` scenario of :mod:`fred.sim.compiled.scenarios`).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from fred.contract import packet as pk
from fred.hdl.fabric import emit_with_shared
from fred.hdl.netlist import Flow
from fred.hdl.switch import Switch

__all__ = ["measure_switch", "measure_online", "data_depth_for", "check_params",
           "activation_samples_for", "run_lockstep", "stress_config", "SCHEMA", "BACKENDS"]

SCHEMA = "fred-switch-timing/2"
#: the simulators that run the measurement (sim/compiled/world.py: one bench, two drivers)
BACKENDS = ("compiled", "cocotb")

#: measure_switch emits the fabric as shared cell modules from this many ports up
SHARED_FROM_PORTS = 8


def _phases(P):
    half = P // 2
    lo, hi = set(range(half)), set(range(half, P))
    return {
        0: (pk.VC_DP, [Flow(lo, lo)]),                       # A
        1: (pk.VC_DP, [Flow(hi, hi)]),                       # B: other config, same VC
        2: (pk.VC_MP, [Flow(set(range(P)), set(range(P)))]),  # C: MP over every port
        3: (pk.VC_MP, [Flow(hi, hi)]),                       # D: MP on the high ports
    }


def data_depth_for(max_len: int) -> int:
    """Default data-VC buffer depth of the measured switch: 3 x max_len flits (12 for the
    4-flit packets of the unit benches, the same buffers as tests/sim/test_switch_bench.py; 24 for
    the paper's 8-flit packets). At least two whole packets (2 x (1 + max_len)) must fit, so
    that a second round can be buffered while the first runs (the phase-switch scenarios need
    it)."""
    return 3 * max_len


def check_params(ports, max_len=4, data_depth=None) -> int:
    """Validate the measurement parameters (cheaply, before any build); return the data
    depth to use. Raises ValueError naming the bad value."""
    if not isinstance(ports, int) or isinstance(ports, bool) or ports < 4:
        raise ValueError(f"switch ports {ports!r} must be an integer >= 4 (the scenarios use "
                         f"the low and high halves of the ports)")
    if not isinstance(max_len, int) or isinstance(max_len, bool) or not 1 <= max_len <= 255:
        raise ValueError(f"switch packet length {max_len!r} must be 1..255 data flits")
    depth = data_depth_for(max_len) if data_depth is None else data_depth
    if not isinstance(depth, int) or depth < 2 * (max_len + 1):
        raise ValueError(f"data_depth {depth!r} must hold two packets of 1 + {max_len} flits "
                         f"(>= {2 * (max_len + 1)})")
    return depth


def activation_samples_for(ports: int) -> int:
    """Idle-switch activation samples (the worst is reported): 2 (P - 1), at least 6, so that
    the control unit's scanner (one port per cycle) is met at many positions."""
    return max(6, 2 * (ports - 1))


def measure_switch(ports=4, middle=3, lanes=2, dtype="int32", fabric="fred", seed=1,
                   preemptions=10, stress_rounds=12, max_len=4, data_depth=None,
                   ctrl_depth=2, activation_samples=None, shared=None, backend="compiled",
                   table_entries=8) -> dict:
    """Run the measurement and stress benches; return the dict documented above.

    ``max_len``: data flits per packet in every measured round (the paper's 4 KB packets in
    512 B flits are 8); ``data_depth`` (default :func:`data_depth_for`) and ``ctrl_depth``:
    input buffer per port per VC in flits; ``activation_samples`` (default
    :func:`activation_samples_for`); ``shared``: emit the fabric with shared cell modules (see
    :func:`_build`; same circuit, much faster Verilator build); ``None`` (default) = from
    :data:`SHARED_FROM_PORTS` ports up, below that the per-instance Verilog that
    tests/sim/test_switch_bench.py and sim/characterize/overlap.py build (so their builds are shared).
    ``backend``: one of :data:`BACKENDS` (the same figures for the same seed).
    ``table_entries``: the phase table's capacity (8: the unit benches' switch; ``None``: the
    switch's default, what fits the paper's 1.5 KB -- the build the all-to-all measurement
    needs, so that ``fred characterize`` builds one switch for all its switch measurements;
    the scenarios use 4 entries, their figures do not depend on the capacity).
    """
    depth = check_params(ports, max_len, data_depth)
    if backend not in BACKENDS:
        raise ValueError(f"switch measurement backend {backend!r} must be one of {', '.join(BACKENDS)}")
    if shared is None:
        shared = ports >= SHARED_FROM_PORTS
    if activation_samples is None:
        activation_samples = activation_samples_for(ports)
    t0 = time.monotonic()
    verilog, sw = _build(ports, middle, lanes, dtype, fabric, depth=depth, ctrl_depth=ctrl_depth,
                         max_len=max_len, entries=table_entries, shared=shared)
    cfg = dict(_base_config(sw, _phases(ports)), scenario="measure", preemptions=preemptions,
               max_cycles=200_000, activation_samples=activation_samples)
    scfg = stress_config(sw, stress_rounds)
    tag = f"switch-p{ports}-{dtype}-{sw.fabric_kind}"
    meas, stress = run_lockstep(verilog, sw, tag, [cfg, scfg], seed, backend)
    meas["schema"] = SCHEMA
    meas["activation_samples"] = activation_samples
    meas["params"] = sw.describe()
    meas["peak_occupancy_flits"] = stress["peak"]
    meas["stress"] = {k: stress[k] for k in ("cycles", "rounds", "worst_round")}
    meas["runtime_s"] = round(time.monotonic() - t0, 1)
    return meas


_BUILDS = {}


def _build(P, m, lanes, dtype, fabric, depth=12, ctrl_depth=2, max_len=4, entries=8, shared=False,
           fault=None):
    """The bench build: ``(verilog, switch)``.

    ``shared``: the FRED fabric's cells are emitted once per cell kind as modules that every
    cell instantiates (the form of :func:`fred.hdl.fabric.recursive.fabric_verilog_text`), instead of one
    module per cell instance. Same circuit (every measured figure is identical); Verilator then
    compiles each cell kind once rather than inlining every cell into one huge model: the
    12-port switch builds in about 3 minutes instead of 14. ``shared=False`` (default) is
    ``emit(Switch(...))``, as tests/sim/test_switch_bench.py builds it. ``fault``: a broken switch
    (``fred.hdl.switch.top.SWITCH_FAULTS``, tests only).
    """
    key = (P, m, lanes, dtype, fabric, depth, ctrl_depth, max_len, entries, shared, fault)
    if key not in _BUILDS:
        registry = {}       # filled while the switch is emitted, when the fabric shares cells
        sw = Switch(P, m, lanes, dtype, data_depth=depth, ctrl_depth=ctrl_depth, max_len=max_len,
                    table_entries=entries, fabric=fabric, out_credits=(0, 0, 0, 0), fault=fault,
                    _shared=registry if shared and fabric == "fred" else None)
        _BUILDS[key] = (emit_with_shared(sw, "fred_switch", registry), sw)
    return _BUILDS[key]


def stress_config(sw, rounds: int) -> dict:
    """The stress scenario's configuration (:func:`fred.sim.compiled.world.stress`) on switch
    ``sw``: a DP phase over every port, an MP pair, a PP ring; ``rounds`` rounds per VC with
    control packets, start skew, idle sources, stalled sinks, slow and starved credits."""
    P = sw.P
    sphases = {
        0: (pk.VC_DP, [Flow(set(range(P)), set(range(P)))]),
        1: (pk.VC_MP, [Flow({0, 1}, {0, 1})]),
        2: (pk.VC_PP, [Flow({p}, {(p + 1) % P}) for p in range(P)]),
    }
    return dict(_base_config(sw, sphases), scenario="stress", rounds=rounds, ctrl_rate=0.2,
                bad_rate=0.0, skew=40, idle=0.1, stall=0.3, credit_delay=12, starve=0.01,
                starve_len=60, bound=20_000, max_cycles=400_000)


def run_lockstep(verilog, sw, tag, cfgs, seed, backend="compiled", speeds=None) -> list:
    """The results of the lockstep scenarios ``cfgs`` (:mod:`fred.sim.compiled.world`), each
    from a reset, on ``backend``: one compiled instance in this process, or one cocotb run per
    scenario (sim/compiled/cocotb_driver.py). ``speeds`` (a list) gets ``(cycles, seconds)`` of
    each scenario's loop."""
    speeds = [] if speeds is None else speeds
    if backend == "compiled":
        from fred.sim.compiled import load, reset_sequence, run_compiled

        m = load(verilog, sw, tag)
        out = []
        try:
            for c in cfgs:
                t0, c0 = time.perf_counter(), m.cycles + len(reset_sequence(c["cfg_words"]))
                out.append(run_compiled(m, c, seed))
                speeds.append((m.cycles - c0, time.perf_counter() - t0))
        finally:
            m.close()
        return out
    from fred.sim.toolchain import run_bench

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, c in enumerate(cfgs):
            path = Path(tmp) / f"lockstep{k}.json"
            run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.compiled.cocotb_driver",
                      tag=tag, config=dict(c, out=str(path), seed=seed), seed=seed,
                      testcase="switch_lockstep")
            res = json.loads(path.read_text())
            sp = res.pop("_speed")
            speeds.append((sp["cycles"], sp["seconds"]))
            out.append(res)
    return out


def _base_config(sw, phases):
    from fred.sim.golden import phases_to_json
    return {
        "ports": sw.P, "middle": sw.middle, "lanes": sw.lanes, "dtype": sw.dtype.name,
        "fabric": sw.fabric_kind, "depths": list(sw.depths), "max_len": sw.max_len,
        "credit_bits": sw.credit_bits, "fseq_bits": sw.fseq_bits, "phases": phases_to_json(phases),
        "cfg_words": sw.cfg_words(phases), "rx_credits": [120, 120, 120, 8], "credit_delay": 1,
    }


def main():
    """Benchmark entry (``python -m fred.bench switch``): print the measured switch figures."""
    r = measure_switch()
    p = r["params"]
    print(f"FRED_{p['middle']}({p['ports']}) switch, {p['lanes']} x {p['dtype']} lanes, buffers "
          f"{p['depths']} flits, packets 1 + {p['max_len']} flits, fabric latency "
          f"{p['fabric_latency']}")
    for k in ("activation_cycles", "first_data_cycles", "phase_switch_detail"):
        print(f"  {k:22} " + ", ".join(f"{a}={b}" for a, b in r[k].items()))
    print(f"  {'phase_switch_cycles':22} {r['phase_switch_cycles']}")
    pc = r["preemption_cycles"]
    print(f"  {'preemption_cycles':22} min={pc['min']} max={pc['max']} mean={pc['mean']} "
          f"({pc['samples']} samples)")
    print(f"  {'peak_occupancy_flits':22} " + ", ".join(f"{a}={b}" for a, b in r["peak_occupancy_flits"].items()))
    print(f"  {'runtime_s':22} {r['runtime_s']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def measure_online(ports=4, middle=3, lanes=2, dtype="int32", fabric="fred", seed=1, packets=24,
                   length=4, shared=None, backend="compiled") -> dict:
    """Throughput of online routing (the ``throughput`` scenario of
    :mod:`fred.sim.compiled.scenarios`): a random permutation (from ``seed``) as a precompiled
    table phase and as default-index packets, and default-index all-to-all; every input sends
    ``packets`` packets of ``length`` data flits back to back, every packet checked. Returns
    ``{"params", "perm", "packets", "length", "table", "online", "online-a2a", "runtime_s"}``,
    each run's figures as the scenario gives them; ``backend``: one of :data:`BACKENDS`."""
    import random

    depth = check_params(ports, length)
    if not isinstance(packets, int) or isinstance(packets, bool) or not 1 <= packets <= 10_000:
        raise ValueError(f"packets {packets!r} must be 1..10000 per port")
    if backend not in BACKENDS:
        raise ValueError(f"online throughput backend {backend!r} must be one of {', '.join(BACKENDS)}")
    if shared is None:
        shared = ports >= SHARED_FROM_PORTS
    t0 = time.monotonic()
    verilog, sw = _build(ports, middle, lanes, dtype, fabric, depth=depth, ctrl_depth=2,
                         max_len=length, shared=shared)
    if not sw.online:
        raise ValueError(f"this switch does not route online (middle {middle}, "
                         f"{sw.flit_bits}-bit flits)")
    perm = list(range(ports))
    random.Random(seed).shuffle(perm)
    phases = {0: (pk.VC_DP, [Flow({p}, {perm[p]}) for p in range(ports)])}
    out = {"params": sw.describe(), "perm": perm, "packets": packets, "length": length}
    modes = ("table", "online", "online-a2a")
    cfgs = [dict(_base_config(sw, phases), scenario="throughput", mode=mode, perm=perm,
                 packets=packets, length=length, rx_credits=[200, 200, 200, 8], credit_burst=8,
                 max_cycles=400_000) for mode in modes]
    res = run_lockstep(verilog, sw, f"switch-p{ports}-{dtype}-{sw.fabric_kind}", cfgs, seed, backend)
    out.update(zip(modes, res))
    out["runtime_s"] = round(time.monotonic() - t0, 1)
    return out


def main_online():
    """Benchmark entry (``python -m fred.bench switch-online``): online routing vs a table phase."""
    r = measure_online()
    p = r["params"]
    print(f"FRED_{p['middle']}({p['ports']}) switch, {p['lanes']} x {p['dtype']} lanes, "
          f"{r['packets']} packets of 1 + {r['length']} flits per input, permutation {r['perm']}")
    for mode in ("table", "online", "online-a2a"):
        x = r[mode]
        print(f"  {mode:11} {x['cycles']:6} cycles  {x['flits_per_cycle_per_port']:.3f} flits/cycle/port"
              f"  ({x['payload_per_cycle_per_port']:.3f} data)  {x['rounds']} rounds")
    print(f"  {'runtime_s':11} {r['runtime_s']}")
    return 0
