"""``fred sweep``: every MP*DP*PP = 20 strategy of a workload on the mesh and Fred-D
(paper Fig. 2 / Fig. 11): compute and exposed communication per sample."""

from __future__ import annotations

HELP = "evaluate every MP x DP x PP = 20 strategy of a workload on mesh and Fred-D (paper Fig. 2 / 11)"

#: paper §8.3: Fred-D over the mesh averaged over strategies (exposed communication, training)
PAPER_SWEEP = {"transformer-17b": (4.22, 1.63), "transformer-1t": (3.92, 1.44)}


def add_arguments(p):
    from fred.commands.estimate import _fabric, _workload, add_hardware_arguments
    from fred.jobs import add_runner_arguments

    from .options import ListOption, choice

    p.add_argument("--workload", "-w", type=choice("--workload", _workload), default="transformer-17b",
                   metavar="NAME", help="workload, or a workload YAML file (default transformer-17b)")
    p.add_argument("--fabric", "-f", action=ListOption, item=choice("--fabric", _fabric), metavar="NAMES",
                   help="fabrics (repeat or comma-separate; default mesh and fred-d; the mesh is always "
                        "simulated as the reference)")
    p.add_argument("--rule", type=int, choices=(16, 40), default=40,
                   help="minibatch rule: DP x 16 (paper Sec. 8.1-8.2) or DP x 40 (Sec. 8.3, Fig. 2/11; default)")
    p.add_argument("--mode", choices=("weight-stationary", "weight-streaming"), help="execution mode (default: the workload's)")
    add_hardware_arguments(p)
    add_runner_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON (README: JSON output)")
    p.add_argument("--plot", metavar="FILE.png", help="plot compute + exposed communication per strategy")


def sweep_job(job):
    """One strategy x fabric of a sweep (the function the workers run): a row dict with the
    estimate, or ``error`` when the strategy does not fit."""
    from fred import FredError

    from fred.model.training import estimate
    from fred.model.collectives import format_strategy

    w, f, abc, m, rule, p, npu, kw = job
    text = abc if isinstance(abc, str) else format_strategy(abc)
    try:
        e = estimate(w, f, abc, params=p, npu=npu, microbatches=m, samples_per_replica=rule, **dict(kw))
        return {"strategy": text, "fabric": f, "estimate": e, "error": None}
    except FredError as exc:
        return {"strategy": text, "fabric": f, "estimate": None, "error": str(exc)}


def _job_label(job):
    from fred.model.collectives import format_strategy

    return f"{job[0].name} {job[2] if isinstance(job[2], str) else format_strategy(job[2])} on {job[1]}"


def sweep_strategies(w, npus):
    """(strategy, (MP, DP, PP)) of a sweep: every MP x DP x PP = ``npus``; for a
    mixture-of-experts workload also every EP(e) that divides both the DP replicas and the
    experts (EP(1) included; weight-stationary only), as strategy text."""
    from fred.model.collectives import all_strategies, format_strategy

    out = []
    for abc in all_strategies(npus):
        out.append((abc, abc))
        if w.is_moe and w.mode == "weight-stationary":
            out += [(format_strategy(abc, e), abc) for e in range(2, abc[1] + 1)
                    if abc[1] % e == 0 and w.experts % e == 0]
    return out


def sweep(workload="transformer-17b", fabrics=("mesh", "fred-d"), rule=40, *, params=None, npu=None, mode=None,
          sim_options=None, map_fn=None):
    """Every strategy x fabric. Returns a list of dicts: strategy, fabric, estimate (or None and
    ``error`` when the strategy fits in HBM under no allowed memory policy, see
    :mod:`fred.model.workload.memory`; ``sim_options`` may hold ``memory`` and ``memory_choice``). The mesh
    is always simulated (the reference). With the shared memory choice (the default) the mesh's
    estimates run first and every other fabric then runs, per strategy, the memory policy the
    mesh picked. The estimates are independent jobs, run by ``map_fn(fn, jobs, desc=...,
    label=...)`` (default: one after another in this process; the CLI passes
    :meth:`fred.jobs.JobRunner.map`); the result is the same either way."""
    from fred import FredError

    from fred.model.training import resolve_fabrics
    from fred.model.workload import DEFAULT_POLICY
    from fred.model.system import default_params
    from fred.model.workload import load_workload, sweep_microbatches

    if rule not in (16, 40):
        raise FredError(f"minibatch rule must be 16 or 40 (DP x N), got {rule!r}")
    w = load_workload(workload)
    if mode:
        w = w.with_mode(mode)
    p = params or default_params()
    fl = resolve_fabrics(fabrics)
    fl = ["mesh"] + [f for f in fl if f != "mesh"]
    opts = dict(sim_options or {})
    shared = (opts.get("memory", DEFAULT_POLICY) == "auto" and opts.get("memory_choice", "shared") == "shared")
    kw = tuple(sorted(opts.items()))
    plan = []
    for st, abc in sweep_strategies(w, p.npus):
        m = sweep_microbatches(w, abc[2], rule) if (abc[2] > 1 or w.mode == "weight-streaming") else 1
        plan.append((st, m))
    run = map_fn or (lambda fn, jobs, desc=None, label=None: [fn(j) for j in jobs])
    desc = f"fred sweep {w.name}"
    if shared:
        # the reference first: its memory policy per strategy is every fabric's
        mesh = run(sweep_job, [(w, "mesh", abc, m, rule, p, npu, kw) for abc, m in plan], desc=desc + " (mesh)",
                   label=_job_label)
        jobs = []
        for (abc, m), r in zip(plan, mesh):
            ref = () if r["estimate"] is None else (("reference_memory", r["estimate"].memory_policy),)
            jobs += [(w, f, abc, m, rule, p, npu, tuple(sorted(kw + ref))) for f in fl[1:]]
        rest = iter(run(sweep_job, jobs, desc=desc, label=_job_label) if jobs else [])
        out = []
        for r in mesh:
            out += [r] + [next(rest) for _ in fl[1:]]
    else:
        out = run(sweep_job, [(w, f, abc, m, rule, p, npu, kw) for abc, m in plan for f in fl], desc=desc,
                  label=_job_label)
    # speedup of each fabric over the mesh for the same strategy
    for r in out:
        e = r["estimate"]
        if e is None:
            continue
        base = next((x["estimate"] for x in out if x["strategy"] == r["strategy"] and x["fabric"] == "mesh"), None)
        if base is not None:
            e.speedup = base.iteration_time / e.iteration_time
    return out


def summary(results, fabric="fred-d"):
    """Over the strategies that fit, ``fabric`` against the mesh (keys name what they are):

    * ``avg_iteration_speedup``: the mean over strategies of mesh / fabric iteration time;
    * ``exposed_comm_ratio_of_sums``: the mesh's exposed communication summed over the strategies
      (seconds per iteration) over the fabric's;
    * ``avg_beyond_compute_per_sample_*`` and their ratio ``avg_beyond_compute_improvement``: per
      sample, iteration - busy compute (robust where two chains are nearly critical, e.g. offload
      reloads beside compute, and the critical path's exposed kinds flip from one to the other);
    * ``avg_exposed_comm_per_sample_*`` and their ratio ``avg_exposed_comm_improvement``, and
      the same for time per sample (``avg_training_improvement``): the paper's Fig. 11 'Avg.'
      bars (4.22x and 1.63x for Transformer-17B), per-sample means first, then the ratio;
    * per fabric, ``fastest_per_sample_<fabric>`` (least iteration time per sample) and
      ``least_busy_compute_per_sample_<fabric>`` (least busy compute of the busiest NPU per
      sample: the strategy that computes most efficiently, whatever its communication)."""
    pairs = []
    for r in results:
        if r["fabric"] != fabric or r["estimate"] is None:
            continue
        base = next((x["estimate"] for x in results if x["strategy"] == r["strategy"] and x["fabric"] == "mesh"
                     and x["estimate"] is not None), None)
        if base is not None:
            pairs.append((base, r["estimate"]))
    out = {"strategies": len(pairs)}
    if pairs:
        out["avg_iteration_speedup"] = sum(b.iteration_time / f.iteration_time for b, f in pairs) / len(pairs)
        comm = [(b.exposed_comm, f.exposed_comm) for b, f in pairs]
        out["exposed_comm_ratio_of_sums"] = (sum(c[0] for c in comm) / max(1e-30, sum(c[1] for c in comm)))
        # paper-style: average (normalised per sample) bars, then the ratio
        out["avg_exposed_comm_per_sample_mesh"] = sum(b.exposed_comm / b.minibatch for b, _ in pairs) / len(pairs)
        out["avg_exposed_comm_per_sample_fabric"] = sum(f.exposed_comm / f.minibatch for _, f in pairs) / len(pairs)
        out["avg_exposed_comm_improvement"] = (out["avg_exposed_comm_per_sample_mesh"]
                                               / max(1e-30, out["avg_exposed_comm_per_sample_fabric"]))
        out["avg_time_per_sample_mesh"] = sum(b.iteration_time / b.minibatch for b, _ in pairs) / len(pairs)
        out["avg_time_per_sample_fabric"] = sum(f.iteration_time / f.minibatch for _, f in pairs) / len(pairs)
        out["avg_training_improvement"] = out["avg_time_per_sample_mesh"] / out["avg_time_per_sample_fabric"]
        # iteration - busy compute: what the network (and the pipeline) adds, whatever chain is critical
        out["avg_beyond_compute_per_sample_mesh"] = sum(b.beyond_compute / b.minibatch for b, _ in pairs) / len(pairs)
        out["avg_beyond_compute_per_sample_fabric"] = sum(f.beyond_compute / f.minibatch for _, f in pairs) / len(pairs)
        out["avg_beyond_compute_improvement"] = (out["avg_beyond_compute_per_sample_mesh"]
                                                 / max(1e-30, out["avg_beyond_compute_per_sample_fabric"]))
        out["slower_than_mesh"] = sum(1 for b, f in pairs if f.iteration_time > b.iteration_time * (1 + 1e-9))
    for fab in sorted({r["fabric"] for r in results}):
        ok = [r for r in results if r["fabric"] == fab and r["estimate"] is not None]
        if ok:
            best = min(ok, key=lambda r: r["estimate"].iteration_time / r["estimate"].minibatch)
            least = min(ok, key=lambda r: r["estimate"].compute_time / r["estimate"].minibatch)
            out[f"fastest_per_sample_{fab}"] = best["strategy"]
            out[f"least_busy_compute_per_sample_{fab}"] = least["strategy"]
    return out


def format_sweep(results, summ, timing_source, workload, rule, npu=None) -> str:
    from fred.commands.estimate import a2a_lines, memory_cell, memory_line, npu_line
    from fred.model.system import variant

    ok = [r["estimate"] for r in results if r["estimate"] is not None]
    lines = [f"switch timing: {timing_source}"] + ([npu_line(npu)] if npu is not None else []) + [
             f"{workload}: every MP x DP x PP = 20 strategy, minibatch = DP x {rule}; times per sample in microseconds; "
             "compute = compute on the critical path (pipeline fill and drain included), which with the exposed "
             "DP, MP, PP and other (weight streaming + input + activation offload, + inter-wafer with --wafers) makes "
             "the iteration; memory = policy, GB per NPU with all activations in HBM -> as run"]
    moe = any(r["estimate"] is not None and r["estimate"].expert_parallel > 1 for r in results)
    sw = max([18] + [len(r["strategy"]) for r in results])
    if moe:
        lines[-1] = lines[-1].replace("every MP x DP x PP = 20 strategy", "every MP x EP x DP x PP = 20 strategy")
        lines.append("EP = exposed all-to-all (MoE token dispatch and combine); " + "; ".join(a2a_lines(ok)))
    lines += memory_line(ok)
    hdr = (f"{'strategy':{sw}} {'fabric':7} {'mb':>4} {'iter ms':>10} {'us/sample':>10} {'compute':>9} {'DP':>9} {'MP':>9}"
           f" {'PP':>9}" + (f" {'EP':>9}" if moe else "") + f" {'other':>8} {'speedup':>8}  memory")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    mesh_policy = {r["strategy"]: r["estimate"].memory_policy for r in results
                   if r["fabric"] == "mesh" and r["estimate"] is not None}
    for r in results:
        e = r["estimate"]
        if e is None:
            lines.append(f"{r['strategy']:{sw}} {variant(r['fabric']).display:7} INFEASIBLE, skipped: {r['error']}")
            continue
        per = lambda v: v / e.minibatch * 1e6
        other = sum(e.exposed.get(k, 0) for k in ("stream", "input", "offload", "inter_wafer"))
        sp = f"{e.speedup:8.3f}" if e.speedup else f"{'':8}"
        lines.append(f"{e.strategy:{sw}} {variant(e.fabric).display:7} {e.microbatches:4d} {e.iteration_time * 1e3:10.3f} "
                     f"{per(e.iteration_time):10.2f} {per(e.critical_path_compute):9.2f} {per(e.exposed.get('dp', 0)):9.2f} "
                     f"{per(e.exposed.get('mp', 0)):9.2f} {per(e.exposed.get('pp', 0)):9.2f}"
                     + (f" {per(e.exposed.get('ep', 0)):9.2f}" if moe else "") + f" {per(other):8.2f} {sp}"
                     f"  {memory_cell(e, mesh_policy.get(e.strategy))}")
    bad = sorted({r["strategy"] for r in results if r["estimate"] is None})
    if bad:
        lines.append(f"{len(bad)} strateg{'y' if len(bad) == 1 else 'ies'} fit in HBM under no allowed memory policy "
                     f"and are left out of the averages: {', '.join(bad)}")
    if summ.get("strategies"):
        ref = PAPER_SWEEP.get(workload)
        ref = f" (paper, Fig. 11: {ref[0]}x and {ref[1]}x)" if ref else ""
        x, t = summ["avg_exposed_comm_improvement"], summ["avg_training_improvement"]
        lines.append(f"average over {summ['strategies']} strategies (Fred-D vs mesh, per sample): exposed communication "
                     + (f"{x:.2f}x lower" if x >= 1 else f"{1 / x:.2f}x higher") + ", training "
                     + (f"{t:.2f}x faster" if t >= 1 else f"{1 / t:.2f}x slower")
                     + f"{ref}; slower than the mesh: {summ['slower_than_mesh']} of {summ['strategies']}")
        b = summ["avg_beyond_compute_improvement"]
        lines.append("  iteration beyond the busiest NPU's busy compute (pipeline and the communication it waits for, "
                     "whichever chain is critical): " + (f"{b:.2f}x lower" if b >= 1 else f"{1 / b:.2f}x higher")
                     + " on Fred-D")
    for k, v in summ.items():
        for pre, what in (("fastest_per_sample_", "fastest per sample"),
                          ("least_busy_compute_per_sample_", "least busy compute per sample")):
            if k.startswith(pre):
                lines.append(f"{what} on {variant(k[len(pre):]).display}: {v}")
    return "\n".join(lines)


def run(args):
    from fred.commands.estimate import check_mode_options, estimate_result, hardware_from_args, npu_json
    from fred.contract.outputs import check_output_path
    from fred.jobs import runner_from_args
    from fred.model.plots import PLOT_SUFFIXES

    if args.plot is not None:
        check_output_path("--plot", args.plot, suffixes=PLOT_SUFFIXES)
    params, npu, gran = hardware_from_args(args)
    check_mode_options([args.workload], args.mode, args.granularity, args.stream_steps)
    from fred.model.training import resolve_fabrics

    from .collective import check_a2a_applies

    check_a2a_applies(getattr(args, "a2a_method", None), [args.workload], resolve_fabrics(args.fabric or ("mesh", "fred-d")))
    with runner_from_args(args) as runner:
        res = sweep(args.workload, args.fabric or ("mesh", "fred-d"), args.rule, params=params, npu=npu,
                    mode=args.mode, sim_options=gran, map_fn=runner.map)
    fabs = [r["fabric"] for r in res]
    summ = summary(res, "fred-d" if "fred-d" in fabs else fabs[-1])
    ok = [r["estimate"] for r in res if r["estimate"] is not None]
    source = ok[0].timing_source if ok else params.switch.source
    wname = ok[0].workload if ok else args.workload
    if args.plot is not None:
        from fred.model.plots import plot_sweep
        plot_sweep(res, args.plot, title=f"{wname}: every MP x DP x PP = 20 strategy, minibatch = DP x {args.rule}",
                   footnote=f"NPU {npu.flops / 1e12:,.0f} TFLOP/s sustained, {npu.hbm_bw / 1e12:g} TB/s HBM "
                            f"({npu.source}); switch timing: {source}")
    if args.json:
        from .jsonout import document, dumps

        results = [{"strategy": r["strategy"], "fabric": r["fabric"], "error": r["error"],
                    **(estimate_result(r["estimate"]) if r["estimate"] else {})} for r in res]
        print(dumps(document("sweep", results, switch_timing_source=source, workload=wname, rule=args.rule,
                             npu=npu_json(npu), memory_policy_requested=gran.get("memory"),
                             memory_choice=gran.get("memory_choice", "shared") if gran.get("memory") == "auto" else None,
                             summary=_summary_json(summ))))
    else:
        print(format_sweep(res, summ, source, wname, args.rule, npu))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0


#: summary() key -> JSON key (units in the names)
_SUMMARY_UNITS = {"avg_beyond_compute_per_sample_mesh": "avg_beyond_compute_per_sample_mesh_s",
                  "avg_beyond_compute_per_sample_fabric": "avg_beyond_compute_per_sample_fabric_s",
                  "avg_exposed_comm_per_sample_mesh": "avg_exposed_comm_per_sample_mesh_s",
                  "avg_exposed_comm_per_sample_fabric": "avg_exposed_comm_per_sample_fabric_s",
                  "avg_time_per_sample_mesh": "avg_time_per_sample_mesh_s",
                  "avg_time_per_sample_fabric": "avg_time_per_sample_fabric_s"}


def _summary_json(summ) -> dict:
    return {_SUMMARY_UNITS.get(k, k): v for k, v in summ.items()}
