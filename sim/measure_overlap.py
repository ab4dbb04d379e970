"""Overlapping phases on one FRED switch: the flow model's arbitration rule against the RTL.

``measure_overlap(K, J, L, ...)`` runs the cocotb scenario ``switch_overlap``
(sim/bench_overlap.py) on the Verilator build of the 4-port bench switch (FRED_3(4), 2 x int32
lanes, buffers 12/2 flits, max_len 4: the build of tests/test_switch_bench.py, shared through
the build cache): a DP all-reduce over ports {0, 1} streams ``K`` packets of ``L`` data flits
per port; ``o`` cycles after it starts (``o`` in ``offsets``) an MP all-reduce over {2, 3}
offers ``J`` packets per port. Also measured alone. Returns the runs (see the bench) and

* ``dp_delay[o]`` = DP last output flit (with MP) - (DP alone): what the MP burst costs DP;
* ``mp_delay[o]`` = MP last output flit (with DP) - (MP alone), both from MP's first input
  flit: what the DP phase holding the fabric costs MP;
* ``switch_figures``: :func:`fred.sim.measure_switch.measure_switch`'s figures of this same
  build (``figures=True``), i.e. what the system model's timing file would hold for it.

``model_overlap(meas, switch_figures)`` sets the same scenario up in the flow model
(:class:`fred.model.flowsim.Sim` on ``single_switch(4, ..., fred_switches=True)``, DP
``priority=0``, MP ``priority=2``) and returns the predicted delays next to the measured ones.

Units in the model: the clock is 1 Hz, so seconds are cycles, and one "byte" is one flit; a
port moves one flit per cycle (bandwidth 1). *Headers count as payload*: a packet is 1 header
flit + ``L`` data flits and the switch sends consecutive rounds of a phase back to back, one
header per ``L`` data flits (docs/switch.md), so a port is busy ``L + 1`` cycles per packet and
a phase of ``n`` packets per port is an all-reduce of ``n * (L + 1)`` "bytes" per NPU (the
in-switch all-reduce is one flow: every member link carries the buffer once up and once down).
Switch timing from ``switch_figures``: ``latency_cycles`` = ``params.fabric_latency``,
``phase_switch_cycles``, ``preemption_cycles`` = ``preemption_cycles.max`` and
``activation_cycles`` = ``activation_cycles.new_config`` (what fred.model.timing uses). The
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

__all__ = ["measure_overlap", "model_overlap", "proposed_delays", "default_switch_figures",
           "compare_overlap", "tolerance", "DEFAULTS"]

#: the default scenario: 24 DP packets per port, an MP burst of 6 packets, 4 data flits per
#: packet (the bench build's max_len); 5 MP start offsets cover every alignment against the
#: DP rounds (one round per L + 1 = 5 cycles)
DEFAULTS = {"K": 24, "J": 6, "L": 4, "offsets": (40, 41, 42, 43, 44)}


def _bench():
    from fred.sim.measure_switch import _build
    return _build(4, 3, 2, "int32", "fred")


def measure_overlap(K=DEFAULTS["K"], J=DEFAULTS["J"], L=DEFAULTS["L"], seed=1,
                    offsets=DEFAULTS["offsets"], figures=True) -> dict:
    """Run the overlap scenario (and, with ``figures``, the switch measurements of the same
    build); return the dict described in the module docstring."""
    from fred.sim.bench_overlap import overlap_phases
    from fred.sim.measure_switch import _base_config, _phases
    from fred.sim.toolchain import run_bench

    verilog, sw = _bench()
    for nm, v in (("K", K), ("J", J)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{nm} {v!r} must be a positive number of packets per port")
    if not isinstance(L, int) or not 1 <= L <= sw.max_len:
        raise ValueError(f"L {L!r} must be 1..{sw.max_len} data flits (the bench switch's max_len)")
    offsets = [int(o) for o in offsets]
    if not offsets or min(offsets) < 0:
        raise ValueError(f"offsets {offsets!r} must be cycles >= 0")
    t0 = time.monotonic()
    tag = f"switch-p{sw.P}-{sw.dtype.name}-{sw.fabric_kind}"   # = tests/test_switch_bench.py's
    out = {"params": dict(sw.describe(), K=K, J=J, L=L, offsets=offsets, seed=seed)}
    with tempfile.TemporaryDirectory() as tmp:
        res = Path(tmp) / "overlap.json"
        span = (K + J) * (L + 1) + max(offsets) + 400
        cfg = dict(_base_config(sw, overlap_phases()), K=K, J=J, L=L, offsets=offsets,
                   out=str(res), max_cycles=(len(offsets) + 2) * span + 2000)
        run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.bench_overlap",
                  tag=tag, config=cfg, seed=seed, testcase="switch_overlap")
        out["runs"] = json.loads(res.read_text())
        if figures:
            # measure_switch's measurement scenario (not its stress bench) on this build
            fig = Path(tmp) / "figures.json"
            fcfg = dict(_base_config(sw, _phases(sw.P)), out=str(fig), preemptions=10,
                        max_cycles=200_000)
            run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.bench_switch",
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
    from fred.model.timing import load_timing

    return load_timing().data["switch"]


def _model_times(K, J, L, offset, fig):
    """Flow-model completion times (cycles) of (DP with MP, MP with DP, DP alone, MP alone,
    preemptions, resumes); MP times from MP's start."""
    from fred.model import params as P
    from fred.model.flowsim import Sim
    from fred.model.topology import single_switch

    tm = P.SwitchTiming(latency_cycles=float(fig["params"]["fabric_latency"]), clock_hz=1.0,
                        beats_per_cycle_per_port=1.0, source="rtl bench (measure_overlap)",
                        phase_switch_cycles=float(fig["phase_switch_cycles"]),
                        preemption_cycles=float(fig["preemption_cycles"]["max"]),
                        activation_cycles=float(fig["activation_cycles"]["new_config"]))

    def run(dp, mp):
        t = single_switch(4, 1.0, 0.0, in_switch=True, timing=tm, fred_switches=True)
        s = Sim(t)
        a = s.collective("all-reduce", [0, 1], K * (L + 1), priority=0, label="dp") if dp else None
        m = None
        if mp:
            d = s.delay(float(offset))
            m = s.collective("all-reduce", [2, 3], J * (L + 1), deps=[d], priority=2, label="mp")
        r = s.run()
        return (float(r.finish[a]) if dp else None,
                float(r.finish[m]) - offset if mp else None, r.preemptions, r.resumes)

    dp_b, mp_b, npre, nres = run(True, True)
    dp_a = run(True, False)[0]
    mp_a = run(False, True)[1]
    return dp_b, mp_b, dp_a, mp_a, npre, nres


def model_overlap(meas: dict, switch_figures: dict | None = None) -> dict:
    """Predict the scenario of ``meas`` (a :func:`measure_overlap` result, or just its
    ``params`` + optional ``runs``) with the flow model; ``switch_figures``: a
    ``fred-switch-timing/1`` dict (default: ``meas["switch_figures"]``, else the timing file's).

    Returns ``{"offsets", "predicted": {"dp_delay", "mp_delay", "dp_alone", "mp_alone",
    "preemptions", "resumes"}, "measured": {...} (when ``meas`` has runs), "error":
    {"dp_delay", "mp_delay"} (predicted - measured), "timing": the figures used, "proposed":
    :func:`proposed_delays`, "tolerance": :func:`tolerance`}`` (delays per offset, cycles).
    """
    fig = switch_figures or meas.get("switch_figures") or default_switch_figures()
    p = meas["params"]
    K, J, L = p["K"], p["J"], p["L"]
    runs = meas.get("runs")
    offsets = list(p["offsets"])
    pred = {"dp_delay": {}, "mp_delay": {}, "preemptions": {}, "resumes": {}}
    for o in offsets:
        # the MP phase starts when its first input flit is accepted (measured; = o normally)
        t_mp = runs[f"both@{o}"]["mp_in"] if runs else o
        dp_b, mp_b, dp_a, mp_a, npre, nres = _model_times(K, J, L, t_mp, fig)
        pred["dp_delay"][o] = dp_b - dp_a
        pred["mp_delay"][o] = mp_b - mp_a
        pred["preemptions"][o], pred["resumes"][o] = npre, nres
    pred["dp_alone"], pred["mp_alone"] = dp_a, mp_a
    out = {"offsets": offsets, "predicted": pred,
           "timing": {"fabric_latency": fig["params"]["fabric_latency"],
                      "phase_switch_cycles": fig["phase_switch_cycles"],
                      "preemption_cycles": fig["preemption_cycles"]["max"],
                      "activation_new_config": fig["activation_cycles"]["new_config"],
                      "dtype": fig["params"].get("dtype"), "lanes": fig["params"].get("lanes")}}
    out["proposed"] = proposed_delays(K, J, L, fig)
    out["tolerance"] = tolerance(L, p.get("ports", 4))
    if runs:
        m = {"dp_delay": {o: meas["dp_delay"][o] for o in offsets},
             "mp_delay": {o: meas["mp_delay"][o] for o in offsets},
             "dp_alone": runs["dp_alone"]["dp_end"], "mp_alone": runs["mp_alone"]["mp_end"],
             "dp_gap": {o: runs[f"both@{o}"]["dp_gap"] for o in offsets},
             "mp_first": {o: runs[f"both@{o}"]["mp_first"] for o in offsets},
             "mp_first_alone": runs["mp_alone"]["mp_first"]}
        out["measured"] = m
        out["error"] = {k: {o: pred[k][o] - m[k][o] for o in offsets} for k in ("dp_delay", "mp_delay")}
    return out


def proposed_delays(K, J, L, fig) -> dict:
    """The arbitration cost the RTL shows (docs: "Model vs RTL: overlapping phases"), as a
    closed form for the scenario: the preempted DP phase loses the MP burst's J (L + 1) cycles
    plus *two* phase switches (fabric idle while switching to MP and back); the preempting MP
    phase pays ``preemption_cycles.max - activation_cycles.new_config`` over its alone time
    (the alone time already holds one activation of a new configuration)."""
    ps = fig["phase_switch_cycles"]
    return {"dp_delay": J * (L + 1) + 2 * ps,
            "mp_delay": fig["preemption_cycles"]["max"] - fig["activation_cycles"]["new_config"]}


def tolerance(L, ports=4) -> int:
    """Allowed |predicted - measured| per run, cycles: one packet time (L + 1: the fluid model
    has no packet boundaries, the RTL preempts only between rounds, so the MP phase waits 0..L+1
    cycles for the DP round in flight depending on alignment, and the model takes the worst
    case) + ports - 1 (the control unit's scanner visits one port per cycle: activation jitter
    of up to P - 1 cycles in the RTL, absent from the model)."""
    return (L + 1) + (ports - 1)


def compare_overlap(**kw) -> dict:
    """``model_overlap(measure_overlap(**kw))`` plus the measurement itself (``"meas"``)."""
    meas = measure_overlap(**kw)
    return dict(model_overlap(meas), meas=meas)


def main():
    r = compare_overlap()
    m, pr = r["measured"], r["predicted"]
    p = r["meas"]["params"]
    print(f"FRED_{p['middle']}({p['ports']}) switch, {p['lanes']} x {p['dtype']}: DP K={p['K']} "
          f"packets/port, MP J={p['J']}, L={p['L']} data flits (+1 header)")
    print(f"timing used by the model: {r['timing']}")
    print(f"alone (cycles, first input flit -> last output flit): DP measured {m['dp_alone']} "
          f"model {pr['dp_alone']:g}; MP measured {m['mp_alone']} model {pr['mp_alone']:g}")
    print(f"{'offset':>6} {'DP delay meas':>13} {'model':>6} {'MP delay meas':>13} {'model':>6} "
          f"{'DP gap':>6} {'MP first':>8}")
    for o in r["offsets"]:
        print(f"{o:6} {m['dp_delay'][o]:13} {pr['dp_delay'][o]:6g} {m['mp_delay'][o]:13} "
              f"{pr['mp_delay'][o]:6g} {m['dp_gap'][o]:6} {m['mp_first'][o]:8}")
    print(f"tolerance +-{r['tolerance']} cycles; rule the RTL follows (proposed): {r['proposed']}")
    print(f"runtime {r['meas']['runtime_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
