"""Overlapping phases on one FRED switch: the flow model's arbitration rule against the RTL.

``measure_overlap(K, J, L, ...)`` runs the cocotb scenario ``switch_overlap``
(sim/benches/overlap.py) on the Verilator build of the 4-port bench switch (FRED_3(4), 2 x int32
lanes, buffers 12/2 flits, max_len 4: the build of tests/sim/test_switch_bench.py, shared through
the build cache): a DP all-reduce over ports {0, 1} streams ``K`` packets of ``L`` data flits
per port; ``o`` cycles after it starts (``o`` in ``offsets``) an MP all-reduce over {2, 3}
offers ``J`` packets per port. Also measured alone. Returns the runs (see the bench) and

* ``dp_delay[o]`` = DP last output flit (with MP) - (DP alone): what the MP burst costs DP;
* ``mp_delay[o]`` = MP last output flit (with DP) - (MP alone), both from MP's first input
  flit: what the DP phase holding the fabric costs MP;
* ``switch_figures``: :func:`fred.sim.characterize.switch.measure_switch`'s figures of this same
  build (``figures=True``), i.e. what the system model's timing file would hold for it.

The flow model's side of the comparison (``model_overlap``, ``proposed_delays``, ``tolerance``)
is in :mod:`fred.benchmarks.overlap`, the layer that may import both the benches and the model.

Units in the model: the clock is 1 Hz, so seconds are cycles, and one "byte" is one flit; a
port moves one flit per cycle (bandwidth 1). *Headers count as payload*: a packet is 1 header
flit + ``L`` data flits and the switch sends consecutive rounds of a phase back to back, one
header per ``L`` data flits (docs/switch.md), so a port is busy ``L + 1`` cycles per packet and
a phase of ``n`` packets per port is an all-reduce of ``n * (L + 1)`` "bytes" per NPU (the
in-switch all-reduce is one flow: every member link carries the buffer once up and once down).
Switch timing from ``switch_figures``: ``latency_cycles`` = ``params.fabric_latency``,
``phase_switch_cycles``, ``preemption_cycles`` = ``preemption_cycles.max`` and
``activation_cycles`` = ``activation_cycles.new_config`` (what fred.model.system.timing.switch_timing uses). The
constant latencies cancel in the delays; what remains of the model is its arbitration rule: the
MP flow takes the switch fabric at once (DP rate 0 while MP sends), MP pays
``preemption - activation`` (it waits for the DP round in flight; the activation is in its
alone time already), DP loses *two* phase switches (the fabric drains and loads MP's
configuration, and again when it switches back), so

    predicted dp_delay = J (L + 1) + 2 phase_switch_cycles,
    predicted mp_delay = preemption_cycles.max - activation_cycles.new_config

(as long as the MP burst starts after the DP stream and ends before it). This rule was derived
from this bench (an earlier rule, one phase switch for DP and the whole preemption latency for
MP, missed by up to 12 cycles); :func:`proposed_delays` is its closed form and
:func:`tolerance` the allowed per-run difference.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from fred.contract.timing import load_timing

__all__ = ["measure_overlap", "default_switch_figures", "DEFAULTS"]

#: the default scenario: 24 DP packets per port, an MP burst of 6 packets, 4 data flits per
#: packet (the bench build's max_len); 5 MP start offsets cover every alignment against the
#: DP rounds (one round per L + 1 = 5 cycles)
DEFAULTS = {"K": 24, "J": 6, "L": 4, "offsets": (40, 41, 42, 43, 44)}


def _bench(fault=None):
    from .switch import _build
    return _build(4, 3, 2, "int32", "fred", fault=fault)


def measure_overlap(K=DEFAULTS["K"], J=DEFAULTS["J"], L=DEFAULTS["L"], seed=1,
                    offsets=DEFAULTS["offsets"], figures=True, fault=None) -> dict:
    """Run the overlap scenario (and, with ``figures``, the switch measurements of the same
    build); return the dict described in the module docstring. ``fault`` builds a broken switch
    (``fred.hdl.switch.top.SWITCH_FAULTS``; tests only: the bench must fail)."""
    from fred.sim.benches import overlap_phases
    from .switch import _base_config, _phases
    from fred.sim.toolchain import run_bench

    verilog, sw = _bench(fault)
    for nm, v in (("K", K), ("J", J)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{nm} {v!r} must be a positive number of packets per port")
    if not isinstance(L, int) or not 1 <= L <= sw.max_len:
        raise ValueError(f"L {L!r} must be 1..{sw.max_len} data flits (the bench switch's max_len)")
    offsets = [int(o) for o in offsets]
    if not offsets or min(offsets) < 0:
        raise ValueError(f"offsets {offsets!r} must be cycles >= 0")
    t0 = time.monotonic()
    tag = f"switch-p{sw.P}-{sw.dtype.name}-{sw.fabric_kind}" + (f"-{fault}" if fault else "")
    # = tests/sim/test_switch_bench.py's tag, so the two share a build
    out = {"params": dict(sw.describe(), K=K, J=J, L=L, offsets=offsets, seed=seed)}
    with tempfile.TemporaryDirectory() as tmp:
        res = Path(tmp) / "overlap.json"
        span = (K + J) * (L + 1) + max(offsets) + 400
        cfg = dict(_base_config(sw, overlap_phases()), K=K, J=J, L=L, offsets=offsets,
                   out=str(res), max_cycles=(len(offsets) + 2) * span + 2000)
        run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.benches.overlap",
                  tag=tag, config=cfg, seed=seed, testcase="switch_overlap")
        out["runs"] = json.loads(res.read_text())
        if figures:
            # measure_switch's measurement scenario (not its stress bench) on this build
            fig = Path(tmp) / "figures.json"
            fcfg = dict(_base_config(sw, _phases(sw.P)), out=str(fig), preemptions=10,
                        max_cycles=200_000)
            run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.benches.switch",
                      tag=tag, config=fcfg, seed=seed, testcase="switch_measure")
            out["switch_figures"] = dict(json.loads(fig.read_text()), params=sw.describe())
    runs = out["runs"]
    both = {o: runs[f"both@{o}"] for o in offsets}
    out["dp_delay"] = {o: both[o]["dp_end"] - runs["dp_alone"]["dp_end"] for o in offsets}
    out["mp_delay"] = {o: both[o]["mp_end"] - runs["mp_alone"]["mp_end"] for o in offsets}
    out["runtime_s"] = round(time.monotonic() - t0, 1)
    return out


def default_switch_figures() -> dict:
    """The ``switch`` section of the embedded timing file (NB: measured on the 12-port, 4 x
    fp16-lane chiplet switch with 8-flit packets, not on this 4-port int32 bench build)."""

    return load_timing().data["switch"]
