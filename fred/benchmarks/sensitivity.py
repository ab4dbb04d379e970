"""``python -m fred.bench sensitivity``: how much the answers move when each measured switch figure
of the timing file is scaled -- does the verified switch decide anything?

Figures (the timing file's ``summary``, as the model reads them, :mod:`fred.model.system.timing`):
the switch traversal latency (``switch_latency_cycles``, the chiplet fabric's latency plus the
switch overhead), the chiplet fabric's latency alone (``fabric_latency_cycles``; the overhead
kept), ``activation_cycles``, ``phase_switch_cycles``, ``preemption_cycles_max``, and all of
them together; each scaled by 0.5, 2 and 10 (the model's :class:`~fred.model.system.timing.SwitchTiming`
built as :func:`~fred.model.system.timing.switch_timing` builds it from a file with those figures; an
activation scaled above the preemption figure makes preemption free, which a timing file could
not say). Answers, each against the unscaled run, the largest move in percent (signed) over the
FRED fabrics (the mesh has no switches: it never moves):

* dense training: the iteration time of every workload of the ``fred estimate`` table;
* decode at batch 1: the time per output token of every bundled decoder model ``fred infer``
  serves at its default split (``DECODE``), prompt 1024, 256 output tokens;
* prefill: the time to first token of the same runs;
* decode with wafer-wide tensor parallelism: the time per output token of ``WIDE`` (Llama-2-70B,
  MP(20), batch 1): every All-Reduce spans the wafer (on FRED through the L2 switch);
* MoE training: the iteration time of each bundled MoE workload (``MOE``) at its default strategy
  and the default NPU (``fred estimate -w <moe>``) on ``MOE_FABRICS`` (Fred-C and Fred-D: the
  full-bandwidth L1<->L2 links; Fred-A/B differ from them only in those links).

The MoE family also gets its own table (:func:`moe_table`): the iteration on the mesh and on
``MOE_FABRICS`` with the timing file's ``all_to_all`` section as the model reads it (default method),
with the other method, with both all-to-all throughput figures scaled (``A2A_FACTORS``), with every
cycle figure x 10, and with an all-to-all at line rate (the section dropped), and the speedup over
the mesh of each: how much of FRED's MoE speedup the measured switch keeps or costs. A timing file
without the section says so (line rate). The table is rewritten between the markers of
docs/sensitivity.md, the serving table of Llama-2-70B (``SERVE_MODEL``) on every fabric between
those of docs/inference.md, the MoE training table on every fabric and all-to-all method
(:func:`moe_training_table`) between those of docs/training.md.
"""

from __future__ import annotations

import dataclasses
import os
import time

from fred.contract.timing import load_timing
from fred.model.inference import infer, infer_table
from fred.model.system import NO_A2A_SECTION, default_params, switch_timing, variant
from fred.model.training import FABRIC_ORDER, estimate, resolve_workloads

from .docblock import rewrite_block

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "sensitivity.md")
TRAINING_DOC = os.path.join(ROOT, "docs", "training.md")
SERVE_DOC = os.path.join(ROOT, "docs", "inference.md")

FIGURES = ("switch latency", "fabric latency", "activation", "phase switch", "preemption", "all together")
FACTORS = (0.5, 2, 10)
FRED = ("fred-a", "fred-b", "fred-c", "fred-d")
#: the decoder models served (batch 1, their default split)
DECODE = ("llama2-70b", "gpt3-175b")
INFER = dict(batch=1, prompt_tokens=1024, output_tokens=256)
#: the wide tensor-parallel decode: model and split
WIDE = ("llama2-70b", "MP(20)-DP(1)-PP(1)")
#: the serving table: this model at these (batch per replica, split; None: the default) on every
#: fabric, measured timing
SERVE_MODEL = "llama2-70b"
SERVE_CASES = ((1, None), (32, None), (1, WIDE[1]))
#: the MoE training family: bundled MoE workloads (default strategy) on these FRED fabrics
MOE = ("mixtral-8x7b", "deepseek-moe-16b")
MOE_FABRICS = ("fred-c", "fred-d")
#: scale factors of the measured all-to-all throughput figures (uniform and skewed; a product
#: above line rate is capped at 1)
A2A_FACTORS = (0.5,)


def scaled(tf, figure: str, k: float):
    """The model's switch timing from timing file ``tf`` with ``figure`` scaled by ``k``."""
    s = tf.summary
    t = switch_timing(tf)
    lat, fab = float(s["switch_latency_cycles"]), float(s.get("fabric_latency_cycles") or 0)
    every = figure == "all together"
    ch = {}
    if figure == "switch latency" or every:
        ch["latency_cycles"] = lat * k
    elif figure == "fabric latency":
        ch["latency_cycles"] = fab * k + (lat - fab)
    if figure == "activation" or every:
        ch["activation_cycles"] = t.activation_cycles * k
    if figure == "phase switch" or every:
        ch["phase_switch_cycles"] = t.phase_switch_cycles * k
    if figure == "preemption" or every:
        ch["preemption_cycles"] = t.preemption_cycles * k
    return dataclasses.replace(t, source=f"{t.source}, {figure} x {k:g}", **ch)


def answers(timing) -> dict:
    """family -> {(workload, fabric): answer seconds} on the FRED fabrics with ``timing``."""
    p = default_params().replace(switch=timing)
    out = {"training": {}, "decode": {}, "prefill": {}, "wide": {}, "moe": moe_answers(timing)}
    for w in resolve_workloads():
        for f in FRED:
            out["training"][(w, f)] = estimate(w, f, params=p).iteration_time
    for w in DECODE:
        for f in FRED:
            r = infer(w, f, params=p, **INFER)
            out["decode"][(w, f)] = r.tpot
            out["prefill"][(w, f)] = r.ttft
    for f in FRED:
        out["wide"][(WIDE[0], f)] = infer(WIDE[0], f, WIDE[1], params=p, **INFER).tpot
    return out


def moe_answers(timing, fabrics=MOE_FABRICS) -> dict:
    """{(MoE workload, fabric): iteration seconds} with switch ``timing`` (default strategy and NPU)."""
    p = default_params().replace(switch=timing)
    return {(w, f): estimate(w, f, params=p).iteration_time for w in MOE for f in fabrics}


def a2a_scaled(timing, k: float):
    """``timing`` with both all-to-all throughput figures (uniform, skewed) of its method x ``k``
    (capped at line rate)."""
    a = timing.all_to_all
    a = dataclasses.replace(a, uniform=min(1.0, a.uniform * k), skewed=min(1.0, a.skewed * k),
                            source=f"{a.source}, throughput x {k:g}")
    return dataclasses.replace(timing, all_to_all=a, source=f"{timing.source}, all-to-all throughput x {k:g}")


def moe_runs(tf) -> list:
    """[(label, {(workload, fabric): iteration s})]: the MoE family under each all-to-all case; the
    mesh once (it has no switch)."""
    t = switch_timing(tf)
    mesh = moe_answers(t, ("mesh",))
    cases = []
    if t.all_to_all is None:
        cases.append((f"timing file as read ({NO_A2A_SECTION})", t))
    else:
        a = t.all_to_all
        cases.append((f"measured, {a.method} (default)", t))
        for m in a.methods:
            if m != a.method:
                cases.append((f"measured, {m}", t.with_all_to_all_method(m)))
        for k in A2A_FACTORS:
            cases.append((f"{a.method}, all-to-all throughput x {k:g}", a2a_scaled(t, k)))
    cases.append(("every cycle figure x 10", scaled(tf, "all together", 10)))
    cases.append(("all-to-all at line rate (no all_to_all section)", dataclasses.replace(t, all_to_all=None)))
    return [("mesh", mesh)] + [(label, moe_answers(ti)) for label, ti in cases]


def moe_table(tf, runs) -> str:
    """The MoE family's table: iteration ms and speedup over the mesh per all-to-all case."""
    mesh = dict(runs[0][1])
    fabs = [f for f in MOE_FABRICS]
    head = ("| case | " + " | ".join(f"{w}, {variant(f).display} ms (speedup)" for w in MOE for f in fabs) + " |")
    rows = [head, "|---|" + "---:|" * (len(MOE) * len(fabs))]
    rows.append("| mesh | " + " | ".join(f"{mesh[(w, 'mesh')] * 1e3:,.1f}" for w in MOE for f in fabs) + " |")
    for label, got in runs[1:]:
        rows.append(f"| {label} | " + " | ".join(
            f"{got[(w, f)] * 1e3:,.1f} ({mesh[(w, 'mesh')] / got[(w, f)]:.3f})" for w in MOE for f in fabs) + " |")
    meas, line = runs[1][1], runs[-1][1]
    notes = []
    for w in MOE:
        for f in fabs:
            m, l = mesh[(w, "mesh")] / meas[(w, f)], mesh[(w, "mesh")] / line[(w, f)]
            notes.append(f"{w} on {variant(f).display}: {m:.3f} with the measured switch vs {l:.3f} with a line-rate "
                         f"all-to-all ({100.0 * (m / l - 1.0):+.1f}%"
                         + (f"; the measured switch keeps {100.0 * (m - 1.0) / (l - 1.0):.0f}% of the line-rate gain"
                            if l > 1.0 else "") + ")")
    a = switch_timing(tf).all_to_all
    src = a.describe() if a else NO_A2A_SECTION
    return (f"MoE training (`fred estimate -w {','.join(MOE)}`, default strategy and NPU; all-to-all as the model "
            f"reads the timing file: {src}). Iteration ms and, in brackets, the speedup over the mesh (the mesh "
            f"has no switch: one run):\n\n" + "\n".join(rows) + "\n\nSpeedup over the mesh: " + "; ".join(notes) + ".")


def moe_training_table(tf) -> str:
    """docs/training.md's MoE table: ``fred estimate -w MOE`` on every fabric, the all-to-all at each
    method of the timing file's section and at line rate (the section dropped)."""
    t = switch_timing(tf)
    cases = ([(m, t.with_all_to_all_method(m)) for m in t.all_to_all.methods] if t.all_to_all else []) \
        + [("line rate", dataclasses.replace(t, all_to_all=None))]
    got = {}
    for label, ti in cases:
        p = default_params().replace(switch=ti)
        for w in MOE:
            for f in FABRIC_ORDER:
                got[(label, w, f)] = estimate(w, f, params=p)
    names = [c[0] for c in cases]
    rows = ["| workload | fabric | strategy | " + " | ".join(f"{n}: iteration ms (EP a2a exposed ms)" for n in names)
            + " | speedup over the mesh (" + " / ".join(names) + ") |",
            "|---|---|---|" + "---:|" * (len(names) + 1)]
    for w in MOE:
        for f in FABRIC_ORDER:
            r0 = got[(names[0], w, f)]
            rows.append(f"| {w} | {variant(f).display} | {r0.strategy} | " + " | ".join(
                f"{got[(n, w, f)].iteration_time * 1e3:,.1f} ({got[(n, w, f)].exposed['ep'] * 1e3:,.1f})" for n in names)
                + " | " + " / ".join(f"{got[(n, w, 'mesh')].iteration_time / got[(n, w, f)].iteration_time:.3f}"
                                     for n in names) + " |")
    src = "; ".join(t.with_all_to_all_method(m).all_to_all.describe() for m in t.all_to_all.methods) \
        if t.all_to_all else NO_A2A_SECTION
    return (f"`fred estimate -w {','.join(MOE)} --all-to-all-method M` (default parameter set, strategy and NPU), "
            f"one run per method of the timing file ({src}), and one with its all_to_all section dropped "
            f"(line rate):\n\n" + "\n".join(rows))


def largest_move(base: dict, got: dict, only=None) -> tuple[float, tuple]:
    """(signed percent, cell) of the largest relative change of ``got`` against ``base``."""
    cells = [c for c in base if only is None or c[1] == only]
    moves = [(100.0 * (got[c] / base[c] - 1.0), c) for c in cells if base[c] > 0]
    return max(moves, key=lambda m: (abs(m[0]), m[1]))


def _cell(move) -> str:
    pct, (w, f) = move
    return f"{pct:+.3f}% ({w}, {variant(f).display})"


def _all_to_all_line(tf) -> str:
    t = switch_timing(tf)
    if t.all_to_all is None:
        return ("All-to-all online vs precompiled: this timing file has no `all_to_all` section (the model "
                "moves all-to-all bytes at line rate on FRED), so there is nothing to scale.")
    a = t.all_to_all
    return ("All-to-all section of the timing file, as the model reads it (`model/system/timing.py`): " + "; ".join(
        (t.with_all_to_all_method(m).all_to_all.describe() + (" (default)" if m == a.method else ""))
        for m in a.methods) + ".")


def table(tf, base, runs, moe=None) -> str:
    s = tf.summary
    head = (f"Measured figures scaled (timing file {tf.describe()}): switch latency "
            f"{s['switch_latency_cycles']} cycles (chiplet fabric {s.get('fabric_latency_cycles')} + overhead "
            f"{s.get('switch_overhead_cycles')}), activation {s.get('activation_cycles')}, phase switch "
            f"{s.get('phase_switch_cycles')}, preemption {s.get('preemption_cycles_max')}; switch clock 1 GHz. "
            f"Largest move of the answer over Fred-A..D, in percent (the mesh has no switches and does not "
            f"move). Training: iteration time of {', '.join(resolve_workloads())}. Decode: time per output "
            f"token of {', '.join(DECODE)} at batch {INFER['batch']}, prompt {INFER['prompt_tokens']}, "
            f"{INFER['output_tokens']} output tokens; prefill: time to first token of the same runs; wide MP: "
            f"time per output token of {WIDE[0]} at {WIDE[1]}, same sizes. MoE training: iteration time of "
            f"{', '.join(MOE)} (default strategy) on {', '.join(variant(f).display for f in MOE_FABRICS)}, the "
            f"all-to-all at the timing file's default method.")
    rows = ["| figure | x | training iteration | decode TPOT, Fred-D | decode TPOT, Fred-A..D | prefill TTFT | "
            "wide-MP decode TPOT, Fred-D | wide-MP decode TPOT, Fred-A..D | MoE training iteration, Fred-D | "
            "MoE training iteration, Fred-C/D |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for (fig, k), got in runs:
        rows.append(f"| {fig} | {k:g} | {_cell(largest_move(base['training'], got['training']))} | "
                    f"{_cell(largest_move(base['decode'], got['decode'], 'fred-d'))} | "
                    f"{_cell(largest_move(base['decode'], got['decode']))} | "
                    f"{_cell(largest_move(base['prefill'], got['prefill']))} | "
                    f"{_cell(largest_move(base['wide'], got['wide'], 'fred-d'))} | "
                    f"{_cell(largest_move(base['wide'], got['wide']))} | "
                    f"{_cell(largest_move(base['moe'], got['moe'], 'fred-d'))} | "
                    f"{_cell(largest_move(base['moe'], got['moe']))} |")
    base_line = ("Unscaled answers on Fred-D: " + "; ".join(
        f"{w} TPOT {base['decode'][(w, 'fred-d')] * 1e3:.4f} ms, TTFT {base['prefill'][(w, 'fred-d')] * 1e3:.2f} ms"
        for w in DECODE) + f"; {WIDE[0]} {WIDE[1]} TPOT {base['wide'][(WIDE[0], 'fred-d')] * 1e3:.4f} ms.")
    return "\n".join([head, "", *rows, "", base_line, "", _all_to_all_line(tf),
                      *(["", moe_table(tf, moe)] if moe else [])])


def serving_table() -> str:
    """``fred infer`` of :data:`SERVE_MODEL` in each of :data:`SERVE_CASES` on every fabric."""
    rows = ["| batch | fabric | strategy | TTFT ms | TPOT ms | tokens/s | exposed MP per token, us | "
            "TTFT speedup | TPOT speedup |", "|---|---|---|---|---|---|---|---|---|"]
    for b, split in SERVE_CASES:
        for r in infer_table([SERVE_MODEL], list(FABRIC_ORDER), split, batch=b,
                             prompt_tokens=INFER["prompt_tokens"], output_tokens=INFER["output_tokens"]):
            rows.append(f"| {b} | {variant(r.fabric).display} | {r.strategy} | {r.ttft * 1e3:.2f} | "
                        f"{r.tpot * 1e3:.4f} | {r.tokens_per_s:.1f} | {r.decode_exposed['mp'] * 1e6:.2f} | "
                        f"{r.speedup_ttft:.4f} | {r.speedup_tpot:.4f} |")
    return (f"`fred infer -w {SERVE_MODEL} --batch B [-s SPLIT]` (prompt {INFER['prompt_tokens']}, "
            f"{INFER['output_tokens']} output tokens, the measured timing file, default NPU):\n\n" + "\n".join(rows))


def rewrite(path, name, text) -> None:
    """Replace the block between ``<!-- name:begin -->`` and ``<!-- name:end -->`` of ``path``."""
    rewrite_block(path, f"<!-- {name}:begin -->", f"<!-- {name}:end -->", text)


def main() -> None:
    tf = load_timing()
    t0 = time.process_time()
    serving = serving_table()
    print(serving)
    base = answers(switch_timing(tf))
    runs = []
    for fig in FIGURES:
        for k in FACTORS:
            runs.append(((fig, k), answers(scaled(tf, fig, k))))
            print(f"  {fig} x {k:g}: {time.process_time() - t0:.0f} s CPU so far", flush=True)
    moe = moe_runs(tf)
    print(f"  MoE all-to-all cases: {time.process_time() - t0:.0f} s CPU so far", flush=True)
    text = table(tf, base, runs, moe)
    print(text)
    print(f"({len(runs) + 1} sets of runs and {len(moe)} MoE cases, {time.process_time() - t0:.0f} s CPU)")
    rewrite(SERVE_DOC, "inference", serving)
    rewrite(DOC, "sensitivity", text)
    moe_training = moe_training_table(tf)
    print(moe_training)
    rewrite(TRAINING_DOC, "moe-training", moe_training)
