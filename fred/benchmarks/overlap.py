"""Overlapping phases on one FRED switch: the flow model's arbitration rule against the RTL.

The RTL side is :func:`fred.sim.characterize.overlap.measure_overlap` (the scenario, the units and the
measured delays are described there). Here the same scenario is set up in the flow model
(:class:`fred.model.collectives.flowsim.Sim` on ``single_switch(4, ..., fred_switches=True)``, DP
``priority=0``, MP ``priority=2``): :func:`model_overlap` returns the predicted delays next to the
measured ones, :func:`proposed_delays` is the rule's closed form and :func:`tolerance` the allowed
per-run difference. ``python -m fred.bench overlap`` runs both and prints the comparison.
"""

from __future__ import annotations

from fred.model.system import params as P
from fred.model.collectives import Sim
from fred.model.network import single_switch
from fred.sim.characterize import default_switch_figures, measure_overlap

__all__ = ["model_overlap", "proposed_delays", "tolerance", "compare_overlap", "main"]


def _model_times(K, J, L, offset, fig):
    """Flow-model completion times (cycles) of (DP with MP, MP with DP, DP alone, MP alone,
    preemptions, resumes); MP times from MP's start."""
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
