"""``fred estimate``: full-wafer training-time estimates, mesh vs FRED (paper Fig. 10 view)."""

from __future__ import annotations

HELP = "training-time estimates for each workload x fabric (mesh, Fred-A..D), with exposed-communication breakdown"

COLS = ("compute", "dp", "mp", "pp", "stream", "input", "offload")
COL_TITLES = {"compute": "compute", "dp": "DP", "mp": "MP", "pp": "PP", "stream": "wstream", "input": "input",
              "offload": "offload"}
#: short names of the memory policies in tables
POLICY_SHORT = {"none": "none", "selective": "sel", "recompute": "rec", "offload": "off",
                "selective+offload": "sel+off", "recompute+offload": "rec+off"}


def add_hardware_arguments(p):
    from fred.model.compute import DEFAULT_NPU, NPU_PRESETS, UTILISATION
    from fred.model.memory import CHOICES, DEFAULT_POLICY

    g = p.add_argument_group("hardware overrides (apply to every workload and fabric alike)")
    g.add_argument("--npu", metavar="NAME", default=None,
                   help=f"NPU preset: {', '.join(NPU_PRESETS)} (default {DEFAULT_NPU}: 989.4 TFLOP/s, 3 TB/s HBM per "
                        "FRED-SPEC, 80 GB; b200: 2250 TFLOP/s, 8 TB/s, 192 GB); the options below override it")
    g.add_argument("--tflops", type=float, metavar="T", help="NPU peak dense FP16 TFLOP/s (default: the preset's)")
    g.add_argument("--utilisation", "--utilization", type=float, metavar="U", dest="utilisation",
                   help=f"fraction of peak sustained by compute-bound layers (default {UTILISATION}: Megatron-LM's "
                        "measured 52%% of peak, Narayanan et al. SC'21)")
    g.add_argument("--hbm-bw", type=float, metavar="TBPS", help="NPU HBM bandwidth in TB/s (default: the preset's)")
    g.add_argument("--hbm-gb", type=float, metavar="GB", help="NPU HBM capacity in GB (default: the preset's)")
    g.add_argument("--memory", metavar="POLICY", default=None,
                   help=f"what to do when activations do not fit in HBM: {'|'.join(CHOICES)} (default {DEFAULT_POLICY}: "
                        "the cheapest policy that fits; none: refuse what does not fit)")
    g.add_argument("--npu-bw", type=float, metavar="TBPS", help="NPU network bandwidth per direction, TB/s (default 3)")
    g.add_argument("--mesh-link-bw", type=float, metavar="GBPS", help="mesh link bandwidth, GB/s (default 750)")
    g.add_argument("--io-bw", type=float, metavar="GBPS", help="I/O controller bandwidth, GB/s (default 128)")
    g.add_argument("--link-latency-ns", type=float, metavar="NS", help="wafer link latency, ns (default 20)")
    g.add_argument("--timing", metavar="FILE", default=None,
                   help="switch timing from a `fred characterize` timing file (default: the embedded one)")
    g.add_argument("--switch-cycles", type=float, metavar="N", help="switch traversal latency in cycles (overrides --timing)")
    g.add_argument("--switch-ghz", type=float, metavar="GHZ", help="switch clock in GHz")
    g.add_argument("--granularity", type=int, metavar="N", default=None,
                   help="DP buckets per stage in the last microbatch's backward (weight stationary; default 4)")
    g.add_argument("--stream-steps", type=int, metavar="N", default=None,
                   help="simulated folds per weight-streaming pass (simulation coarsening; default 4)")


def hardware_from_args(args):
    """(WaferParams, NpuParams, {simulation options}) from the common override options."""
    import dataclasses

    from fred import FredError

    from fred.model import compute as C
    from fred.model.params import GB, NS, TB, default_params

    p = default_params()
    ch = {}
    if getattr(args, "npu_bw", None) is not None:
        ch["npu_net_bw"] = args.npu_bw * TB
    if getattr(args, "mesh_link_bw", None) is not None:
        ch["mesh_link_bw"] = args.mesh_link_bw * GB
    if getattr(args, "io_bw", None) is not None:
        ch["io_bw"] = args.io_bw * GB
    if getattr(args, "hbm_bw", None) is not None:
        ch["hbm_bw"] = args.hbm_bw * TB
    if getattr(args, "link_latency_ns", None) is not None:
        ch["link_latency"] = args.link_latency_ns * NS
    if getattr(args, "timing", None):
        from fred.contract.timing import load_timing
        from fred.model.timing import switch_timing

        clock = args.switch_ghz * 1e9 if getattr(args, "switch_ghz", None) is not None else None
        ch["switch"] = switch_timing(load_timing(args.timing), clock_hz=clock)
    sw = {}
    if getattr(args, "switch_cycles", None) is not None:
        sw["latency_cycles"] = args.switch_cycles
    if getattr(args, "switch_ghz", None) is not None:
        sw["clock_hz"] = args.switch_ghz * 1e9
    if sw:
        sw["source"] = "command line: " + ", ".join(f"{k}={v}" for k, v in sw.items())
        ch["switch"] = dataclasses.replace(ch.get("switch", p.switch), **sw)
    if ch:
        p = p.replace(**ch)
    n, given = {}, []
    for opt, key, scale in (("tflops", "peak_flops", 1e12), ("utilisation", "utilisation", 1.0),
                            ("hbm_bw", "hbm_bw", TB), ("hbm_gb", "hbm_capacity", 1e9)):
        v = getattr(args, opt, None)
        if v is not None:
            n[key] = v * scale
            given.append(f"--{opt.replace('_', '-')} {v:g}")
    base = C.npu_preset(getattr(args, "npu", None) or C.DEFAULT_NPU)
    if n:
        n["source"] = base.source + "; command line: " + " ".join(given)
    npu = base.replace(**n) if n else base
    gran = {}
    if hasattr(args, "memory"):
        from fred.model.memory import DEFAULT_POLICY, check_policy
        gran["memory"] = check_policy(args.memory or DEFAULT_POLICY)
    for opt, key in (("granularity", "granularity"), ("stream_steps", "stream_steps")):
        v = getattr(args, opt, None)
        if v is not None:
            if v < 1:
                raise FredError(f"--{opt.replace('_', '-')} must be >= 1, got {v}")
            gran[key] = v
    return p, npu, gran


def add_arguments(p):
    p.add_argument("--workload", "-w", action="append", metavar="NAME",
                   help="workload(s): resnet-152, transformer-17b, gpt3-175b, transformer-1t (repeat or comma-separate; default all)")
    p.add_argument("--fabric", "-f", action="append", metavar="NAME",
                   help="fabric(s): mesh, fred-a, fred-b, fred-c, fred-d (default all; the mesh is always simulated as the reference)")
    p.add_argument("--strategy", "-s", metavar="MP(a)-DP(b)-PP(c)", help="parallelization (default: each workload's headline strategy; with --trace, derived from the trace's header)")
    p.add_argument("--microbatches", "-m", type=int, metavar="N", help="microbatches per iteration (default: the workload's)")
    p.add_argument("--samples", type=float, metavar="N",
                   help="samples per DP replica, i.e. minibatch = DP x N (default 16)")
    p.add_argument("--mode", choices=("weight-stationary", "weight-streaming"), help="execution mode (default: the workload's)")
    add_hardware_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--plot", metavar="FILE.png", help="draw the stacked breakdown normalised to the mesh (paper Fig. 10)")
    t = p.add_argument_group("ASTRA-sim 1.x text traces (compute from the trace, communication simulated; "
                             "see docs/training.md)")
    t.add_argument("--trace", action="append", metavar="FILE",
                   help="run this trace instead of the built-in workloads (repeat for several)")
    t.add_argument("--trace-clock-ghz", type=float, metavar="GHZ", default=None,
                   help="clock of the trace's cycle counts (default 1)")
    t.add_argument("--trace-header", metavar="TEXT", default=None,
                   help="header line for trace files without one, e.g. 'HYBRID_TRANSFORMER model_parallel_NPU_group: 4'")


def _fmt_ms(x):
    return f"{x * 1e3:10.3f}"


def memory_cell(e) -> str:
    """``policy before->after`` in GB per NPU, e.g. ``sel+off 129->80``."""
    return f"{POLICY_SHORT.get(e.memory_policy, e.memory_policy)} {e.memory_before / 1e9:.0f}->{e.memory_per_npu / 1e9:.0f}"


def npu_line(npu) -> str:
    from fred.model.compute import UTILISATION, UTILISATION_SOURCE

    util = (UTILISATION_SOURCE if npu.utilisation == UTILISATION else f"{npu.utilisation:g} of peak (command line)")
    return (f"NPU: {npu.source}; utilisation {util}; sustained {npu.flops / 1e12:.0f} TFLOP/s, "
            f"{npu.hbm_capacity / 1e9:.0f} GB HBM")


def format_table(rows, timing_source, npu=None) -> str:
    from fred.model.params import variant

    out = [f"switch timing: {timing_source}"]
    if npu is not None:
        out.append(npu_line(npu))
    out.append("times in ms per iteration; exposed communication on the critical path; speedup = mesh / fabric; "
               "memory = policy and GB per NPU with all activations in HBM -> as run")
    hdr = (f"{'workload':16} {'fabric':7} {'strategy':18} {'iter':>10} " + " ".join(f"{COL_TITLES[c]:>10}" for c in COLS)
           + f" {'speedup':>8} {'paper':>6}  memory")
    out.append(hdr)
    out.append("-" * len(hdr))
    for e in rows:
        vals = [e.compute_time] + [e.exposed.get(c, 0.0) for c in COLS[1:]]
        paper = f"{e.paper_speedup:6.2f}" if e.paper_speedup else f"{'':6}"
        sp = f"{e.speedup:8.3f}" if e.speedup is not None else f"{'':8}"
        out.append(f"{e.workload:16} {variant(e.fabric).display:7} {e.strategy:18} {_fmt_ms(e.iteration_time)} "
                   + " ".join(_fmt_ms(v) for v in vals) + f" {sp} {paper}  {memory_cell(e)}")
    notes = sorted({f"{e.workload}: {n}" for e in rows for n in e.notes})
    for n in notes:
        out.append(f"note: {n}")
    return "\n".join(out)


#: options of the built-in workloads and of the roofline NPU, which a trace replaces
_NOT_FOR_TRACES = (("workload", "--workload"), ("microbatches", "--microbatches"), ("samples", "--samples"),
                   ("mode", "--mode"), ("plot", "--plot"), ("tflops", "--tflops"), ("utilisation", "--utilisation"),
                   ("hbm_bw", "--hbm-bw"), ("hbm_gb", "--hbm-gb"), ("granularity", "--granularity"),
                   ("stream_steps", "--stream-steps"), ("npu", "--npu"), ("memory", "--memory"))


def format_trace_table(rows, timing_source) -> str:
    from fred.model.params import variant

    out = [f"switch timing: {timing_source}"]
    seen = []
    for e in rows:
        if e.trace not in seen:
            seen.append(e.trace)
            out.append(f"trace: {e.trace} -- {e.header} (header {'given' if e.header_source == 'given' else 'from the file'}), "
                       f"{e.layers} layers, compute clock {e.clock_ghz:g} GHz, placement {e.placement}")
    out.append("times in ms per iteration; compute from the trace; exposed communication on the critical path; "
               "speedup = mesh / fabric")
    w = max([len("trace")] + [len(e.workload) for e in rows])
    hdr = (f"{'trace':{w}} {'fabric':7} {'strategy':18} {'iter':>10} {'compute':>10} {'MP':>10} {'DP':>10}"
           f" {'speedup':>8}")
    out.append(hdr)
    out.append("-" * len(hdr))
    for e in rows:
        sp = f"{e.speedup:8.3f}" if e.speedup is not None else f"{'':8}"
        out.append(f"{e.workload:{w}} {variant(e.fabric).display:7} {e.strategy:18} {_fmt_ms(e.iteration_time)} "
                   f"{_fmt_ms(e.compute_time)} {_fmt_ms(e.exposed['mp'])} {_fmt_ms(e.exposed['dp'])} {sp}")
    for n in sorted({f"{e.workload}: {n}" for e in rows for n in e.notes}):
        out.append(f"note: {n}")
    return "\n".join(out)


def _run_trace(args):
    import json

    from fred import FredError
    from fred.model.trace_estimate import DEFAULT_CLOCK_GHZ, trace_table

    for attr, opt in _NOT_FOR_TRACES:
        if getattr(args, attr, None) not in (None, False):
            raise FredError(f"{opt} does not apply to --trace (the trace gives the layers and their compute times; "
                            "--trace-clock-ghz sets its clock)")
    params, _, _ = hardware_from_args(args)
    clock = DEFAULT_CLOCK_GHZ if args.trace_clock_ghz is None else args.trace_clock_ghz
    rows = trace_table(args.trace, args.fabric, args.strategy, clock, header=args.trace_header, params=params)
    source = rows[0].timing_source if rows else params.switch.source
    if args.json:
        traces = []
        for e in rows:
            if all(t["path"] != e.trace for t in traces):
                traces.append({"path": e.trace, "kind": e.kind, "header": e.header, "header_source": e.header_source,
                               "layers": e.layers, "strategy": e.strategy, "placement": e.placement})
        print(json.dumps({"kind": "fred-estimate-trace", "switch_timing_source": source, "trace_clock_ghz": clock,
                          "time_unit": "s", "traces": traces, "rows": [e.to_dict() for e in rows]}, indent=2))
    else:
        print(format_trace_table(rows, source))
    return 0


def run(args):
    import json

    from fred import FredError
    from fred.contract.outputs import check_output_path
    from fred.model.estimate import estimate_table
    from fred.model.plots import PLOT_SUFFIXES

    if getattr(args, "trace", None):
        return _run_trace(args)
    for attr, opt in (("trace_clock_ghz", "--trace-clock-ghz"), ("trace_header", "--trace-header")):
        if getattr(args, attr, None) is not None:
            raise FredError(f"{opt} needs --trace FILE")
    if args.plot is not None:
        check_output_path("--plot", args.plot, suffixes=PLOT_SUFFIXES)
    params, npu, gran = hardware_from_args(args)
    kw = dict(params=params, npu=npu, microbatches=args.microbatches, samples_per_replica=args.samples, mode=args.mode)
    kw.update(gran)
    rows = estimate_table(args.workload, args.fabric, args.strategy, **kw)
    source = rows[0].timing_source if rows else params.switch.source
    if args.plot is not None:
        from fred.model.plots import plot_breakdown
        plot_breakdown(rows, args.plot, footnote=f"NPU {npu.flops / 1e12:,.0f} TFLOP/s sustained, {npu.hbm_bw / 1e12:g} TB/s "
                       f"HBM ({npu.source}); switch timing: {source}")
    if args.json:
        from fred.model.compute import UTILISATION_SOURCE
        print(json.dumps({"switch_timing_source": source, "npu": {"name": npu.name, "peak_flops": npu.peak_flops,
                                                                   "utilisation": npu.utilisation,
                                                                   "utilisation_default_source": UTILISATION_SOURCE,
                                                                   "hbm_bw": npu.hbm_bw, "hbm_capacity": npu.hbm_capacity,
                                                                   "source": npu.source},
                          "memory_policy_requested": gran.get("memory"),
                          "rows": [e.to_dict() for e in rows]}, indent=2))
    else:
        print(format_table(rows, source, npu))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0
