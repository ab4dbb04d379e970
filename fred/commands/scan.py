"""``fred scan``: training speedup over the mesh as a function of NPU speed (k x the default NPU)
and samples per DP replica; the k at which each of the paper's eight headline cells is reproduced,
and the crossover k at which each FRED variant saves 10% / 25% of the mesh's iteration time."""

from __future__ import annotations

HELP = ("scan NPU speed (k x the default NPU) and samples per replica: speedup over the mesh, the k that "
        "reproduces each paper cell, crossovers")


#: bounds: k scales the NPU (k = 1e4 is ~1e7 TFLOP/s, the largest --tflops); every k is one
#: estimate per workload x fabric x samples (~0.5 s of CPU each): 100 points of the four
#: workloads on five fabrics are 2,000 estimates
K_LOW, K_HIGH = 1e-3, 1e4
MAX_POINTS = 100


def add_arguments(p):
    from fred.commands.estimate import MAX_MICROBATCHES, MAX_SAMPLES, _fabric, _workload, add_hardware_arguments
    from fred.jobs import add_runner_arguments
    from fred.model.training import K_MAX, K_MIN, K_POINTS, PAPER_SAMPLES_PER_REPLICA

    from .options import ListOption, choice, integer, number

    p.add_argument("--workload", "-w", action=ListOption, item=choice("--workload", _workload), metavar="NAMES",
                   help="workload(s) (repeat or comma-separate; default all four)")
    p.add_argument("--fabric", "-f", action=ListOption, item=choice("--fabric", _fabric), metavar="NAMES",
                   help="fabric(s) (default mesh and Fred-A..D; the mesh is always simulated as the reference)")
    g = p.add_argument_group("scan axes")
    g.add_argument("--k-min", type=number("--k-min", K_LOW, K_HIGH), default=K_MIN, metavar="K",
                   help=f"smallest NPU speed, as a multiple of the default NPU ({K_LOW:g}..{K_HIGH:g}, "
                        f"default {K_MIN:g})")
    g.add_argument("--k-max", type=number("--k-max", K_LOW, K_HIGH), default=K_MAX, metavar="K",
                   help=f"largest multiple ({K_LOW:g}..{K_HIGH:g}, at least --k-min; default {K_MAX:g})")
    g.add_argument("--points", type=integer("--points", 1, MAX_POINTS), default=K_POINTS, metavar="N",
                   help=f"log-spaced k values from --k-min to --k-max (1..{MAX_POINTS}, default {K_POINTS})")
    g.add_argument("--samples", action=ListOption, item=integer("--samples", 1, MAX_SAMPLES), metavar="N[,N...]",
                   help=f"samples per DP replica, the second axis (1..{MAX_SAMPLES:,} each; default "
                        f"{PAPER_SAMPLES_PER_REPLICA:g}, the paper's)")
    g.add_argument("--no-refine", action="store_true",
                   help="report the paper cells at grid resolution (no bisection between grid points)")
    p.add_argument("--microbatches", type=integer("--microbatches", 1, MAX_MICROBATCHES), metavar="N",
                   help=f"microbatches per iteration (1..{MAX_MICROBATCHES} and at most the samples per replica; "
                        f"default: the workload's)")
    p.add_argument("--mode", choices=("weight-stationary", "weight-streaming"), help="execution mode (default: the workload's)")
    add_hardware_arguments(p)
    add_runner_arguments(p)
    p.add_argument("--detail", action="store_true",
                   help="also print every point: iteration time, compute and exposed communication by kind")
    p.add_argument("--json", action="store_true", help="print JSON (README: JSON output)")
    p.add_argument("--plot", metavar="FILE.png", help="speedup vs k, one panel per workload, paper values marked")


# ---- text --------------------------------------------------------------------------------------

def _k(k):
    if k is None:
        return "-"
    return f"{k:.0f}" if k >= 100 else f"{k:.3g}"


def _disp(f):
    from fred.model.system import variant
    return variant(f).display


def _ms(x):
    if x is None:
        return "-"
    v = x * 1e3
    return f"{v:.4g}" if v < 1e3 else f"{v:.0f}"


def format_header(r, run_info="") -> list:
    n = r.npu
    lines = [f"NPU at k = 1: {n.peak_flops / 1e12:.1f} TFLOP/s peak x utilisation {n.utilisation:g}, "
             f"{n.hbm_bw / 1e12:g} TB/s HBM, {n.hbm_capacity / 1e9:g} GB ({n.source})",
             "k multiplies peak FLOP/s and HBM bandwidth (every compute task k times shorter); "
             "network, switch timing and schedule unchanged",
             f"switch timing: {r.timing_source}",
             f"grid: {len(r.k_values)} k values {r.k_values[0]:.3g} .. {r.k_values[-1]:.4g} (log-spaced); "
             f"samples per DP replica: {', '.join(f'{s:g}' for s in r.samples)}" + (f"; {run_info}" if run_info else "")]
    return lines


def format_paper_cells(r) -> list:
    from fred.model.training import PAPER_BAND, REFINE_RTOL

    if not r.paper_cells:
        return []
    how = (f"grid, then bisection in log k to {REFINE_RTOL:.0%}" if r.refine else "grid only")
    out = [f"Paper cells (FRED-SPEC §7): smallest k with the speedup within ±{PAPER_BAND:.0%} of the paper's ({how})"]
    hdr = f"{'workload':16} {'fabric':7} {'samples':>7} {'paper':>6} {'band':>11}  result"
    out += [hdr, "-" * 100]
    for c in r.paper_cells:
        lo, hi = c.band
        if c.reached:
            res = (f"reproduced at k = {_k(c.k)} ({c.k * r.npu.flops / 1e12:,.0f} TFLOP/s sustained): "
                   f"speedup {c.speedup_at_k:.3f} [{c.found_by}]")
        elif c.max_speedup is None:
            res = "does not run (see its table below)"
        else:
            res = f"not reached: max speedup {c.max_speedup:.3f} at k = {_k(c.k_at_max)}"
        out.append(f"{c.workload:16} {_disp(c.fabric):7} {c.samples:7g} {c.paper_speedup:6.2f} "
                   f"{lo:5.2f}-{hi:5.2f}  {res}")
    return out


def format_crossover(r) -> list:
    from fred.model.training import SAVINGS

    if not r.crossovers:
        return []
    out = ["Crossover: grid k from which each fabric saves at least " + " / ".join(f"{s:.0%}" for s in SAVINGS)
           + " of the mesh's iteration time (k .. last k of that run; '-' never)"]
    hdr = f"{'workload':16} {'fabric':7} {'samples':>7} " + " ".join(f"{'>= ' + format(s, '.0%'):>16}" for s in SAVINGS) \
        + f" {'max saving (k)':>20}"
    out += [hdr, "-" * len(hdr)]
    by = {}
    for x in r.crossovers:
        if x.max_saving is not None:          # a configuration that never ran has no row
            by.setdefault((x.workload, x.fabric, x.samples), []).append(x)
    if not by:
        return []
    for (w, f, s), xs in by.items():
        cols = []
        for x in xs:
            cols.append("-" if x.k_from is None else
                        f"{_k(x.k_from)} .. {_k(x.k_until)}" + ("" if x.holds_to_k_max else " !"))
        mx = "-" if xs[0].max_saving is None else f"{xs[0].max_saving:.1%} ({_k(xs[0].k_at_max)})"
        out.append(f"{w:16} {_disp(f):7} {s:7g} " + " ".join(f"{c:>16}" for c in cols) + f" {mx:>20}")
    if any(x.k_from is not None and not x.holds_to_k_max for x in r.crossovers):
        out.append("! the saving is lost again above the last k of the run")
    return out


def format_speedups(r) -> list:
    out = []
    errs = r.errors()
    fabs = [f for f in r.fabrics if f != "mesh"]
    for w in r.workloads:
        for s in r.samples:
            if (w, s) in errs and all(r.points[(w, "mesh", k, s)].error for k in r.k_values):
                out += [f"{w}, {s:g} samples per replica: does not run: {errs[(w, s)]}", ""]
                continue
            out.append(f"{w}, {s:g} samples per replica: speedup over the mesh; iteration and exposed "
                       "communication in ms")
            hdr = (f"{'k':>8} {'mesh iter':>10} {'mesh exp.':>10} " + " ".join(f"{_disp(f):>7}" for f in fabs)
                   + (f" {_disp(fabs[-1]) + ' exp.':>12}" if fabs else ""))
            out += [hdr, "-" * len(hdr)]
            for k in r.k_values:
                m = r.points[(w, "mesh", k, s)]
                row = f"{_k(k):>8} {_ms(m.iteration_time):>10} {_ms(m.exposed_comm if not m.error else None):>10} "
                row += " ".join(f"{r.points[(w, f, k, s)].speedup:7.3f}" if r.points[(w, f, k, s)].speedup else
                                f"{'-':>7}" for f in fabs)
                if fabs:
                    last = r.points[(w, fabs[-1], k, s)]
                    row += f" {_ms(None if last.error else last.exposed_comm):>12}"
                out.append(row)
            out.append("")
    return out


def format_detail(r) -> list:
    from fred.commands.estimate import COLS

    kinds = COLS[1:] + (("inter_wafer",) if any("inter_wafer" in p.exposed for p in r.points.values()) else ()) \
        + (("ep",) if any((p.exposed or {}).get("ep") for p in r.points.values()) else ())
    hdr = (f"{'workload':16} {'samples':>7} {'k':>8} {'fabric':7} {'iter ms':>10} {'compute':>10} "
           + " ".join(f"{k:>9}" for k in kinds) + f" {'speedup':>8}  memory")
    out = ["Every point (ms per iteration; exposed communication by kind on the critical path)", hdr, "-" * len(hdr)]
    for (w, f, k, s), p in r.points.items():
        if p.error:
            out.append(f"{w:16} {s:7g} {_k(k):>8} {_disp(f):7} does not run: {p.error}")
            continue
        out.append(f"{w:16} {s:7g} {_k(k):>8} {_disp(f):7} {_ms(p.iteration_time):>10} {_ms(p.compute_time):>10} "
                   + " ".join(f"{_ms(p.exposed.get(x, 0.0)):>9}" for x in kinds)
                   + (f" {p.speedup:8.3f}" if p.speedup else f" {'-':>8}") + f"  {p.memory_policy}")
    return out


MEMORY_LINES = {
    "shared": "memory: at every point each fabric runs the policy the mesh picks there (the cheapest that fits, by "
              "simulation; --memory-choice per-fabric lets each fabric pick its own)",
    "per-fabric": "memory: at every point each fabric picks its own cheapest fitting policy (--memory-choice "
                  "per-fabric): a speedup may come from the memory policy as well as from the network",
}


def format_scan(r, run_info="", detail=False, memory_choice=None) -> str:
    """The scan as text: its sections one blank line apart; a section with nothing to show is
    left out (no header without rows). ``memory_choice``: how ``--memory auto`` chose (a line
    says so; None: a requested policy)."""
    head = format_header(r, run_info) + ([MEMORY_LINES[memory_choice]] if memory_choice else [])
    parts = [head, format_paper_cells(r), format_crossover(r), format_speedups(r)]
    if detail:
        parts.append(format_detail(r))
    notes = sorted({f"{p.workload}: {n}" for p in r.points.values() for n in p.notes})
    parts.append([f"note: {n}" for n in notes])
    blocks = []
    for part in parts:
        while part and not part[-1].strip():
            part = part[:-1]
        if part:
            blocks.append("\n".join(part))
    return "\n\n".join(blocks) + "\n"


# ---- run ---------------------------------------------------------------------------------------

def run(args):
    import time

    from fred.commands.estimate import check_microbatches, check_mode_options, hardware_from_args
    from fred.jobs import runner_from_args
    from fred.model.training import resolve_workloads
    from fred.model.training import PAPER_SAMPLES_PER_REPLICA, k_grid, scan, to_json

    if args.plot is not None:
        from fred.contract.outputs import check_output_path
        from fred.model.plots import PLOT_SUFFIXES
        check_output_path("--plot", args.plot, suffixes=PLOT_SUFFIXES)
    if args.points > 1 and not args.k_max > args.k_min:
        raise ValueError(f"--k-max {args.k_max:g} must be above --k-min {args.k_min:g} for {args.points} points")
    params, npu, gran = hardware_from_args(args)
    ks = k_grid(args.k_min, args.k_max, args.points)
    samples = args.samples or [PAPER_SAMPLES_PER_REPLICA]
    for s in samples:
        check_microbatches(resolve_workloads(args.workload), args.microbatches, s)
    check_mode_options(resolve_workloads(args.workload), args.mode, args.granularity, args.stream_steps)
    from fred.model.training import resolve_fabrics

    from .collective import check_a2a_applies

    check_a2a_applies(getattr(args, "a2a_method", None), resolve_workloads(args.workload), resolve_fabrics(args.fabric))
    opts = dict(gran)
    if args.microbatches is not None:
        opts["microbatches"] = args.microbatches
    if args.mode:
        opts["mode"] = args.mode
    memory_choice = opts.get("memory_choice", "shared") if opts.get("memory", "auto") == "auto" else None
    runner = runner_from_args(args)
    t0 = time.perf_counter()
    with runner:
        r = scan(args.workload, args.fabric, ks, samples, params=params, npu=npu, options=opts,
                 refine=not args.no_refine, map_fn=runner.map)
    wall = time.perf_counter() - t0
    run_info = f"{runner.describe()}, {wall:.1f} s"
    if args.plot:
        from fred.model.plots import plot_scan
        plot_scan(r, args.plot)
    if args.json:
        from .jsonout import dumps

        doc = to_json(r)
        doc["memory_choice"] = memory_choice
        doc["run"] = {"executor": runner.describe(), "wall_s": round(wall, 1)}
        print(dumps(doc))
    else:
        print(format_scan(r, run_info, args.detail, memory_choice), end="")
        if args.plot:
            print(f"plot: {args.plot}")
    return 0
