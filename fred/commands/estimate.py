"""``fred estimate``: full-wafer training-time estimates, mesh vs FRED (paper Fig. 10 view)."""

from __future__ import annotations

from .labels import (  # noqa: F401  (shared with sweep, scan)
    COL_TITLES, COLS, POLICY_SHORT, a2a_lines, bit_error_help, memory_cell, memory_line, table_cols)

HELP = ("training-time estimates for each workload x fabric (mesh, Fred-A..D, torus, switched, switched-inr), "
        "with exposed-communication breakdown")


#: bounds of the options (what the model is meant for, or what a run costs on the 2-core machine)
MIN_RATE = 1e-3            # least speed, bandwidth or capacity (TFLOP/s, TB/s, GB/s, GB, GHz)
MAX_TFLOPS = 1e7           # 10,000x an H100
MAX_TBPS = 1e3             # HBM and NPU network bandwidth, TB/s
MAX_GBPS = 1e6             # link and I/O bandwidth, GB/s (1 PB/s)
MAX_HBM_GB = 1e6           # 1 PB of HBM per NPU
MAX_LATENCY_NS = 1e9       # 1 s per link hop
MAX_CYCLES = 1e6           # switch traversal (the measured one is 30)
MAX_GHZ = 1e3
MAX_BER = 1e-3            # bit-error rate: at 1e-3 nearly every 4 KB packet is corrupted
MAX_MICROBATCHES = 1024    # the schedule simulates each microbatch: 64 take ~0.6 s of CPU per fabric
MAX_SAMPLES = 1_000_000    # samples per DP replica
MAX_GRANULARITY = 256      # DP buckets per stage (a stage has at most a few hundred layers)
MAX_STREAM_STEPS = 256     # simulated folds per weight-streaming pass (64 take ~1 s of CPU)


def _npu(text):
    from fred.contract.checks import check_choice
    from fred.model.workload import NPU_PRESETS

    return check_choice("--npu", text, tuple(NPU_PRESETS))


def _memory(text):
    from fred.contract.checks import check_choice
    from fred.model.workload import CHOICES

    return check_choice("--memory", text, CHOICES)


def _memory_choice(text):
    from fred.contract.checks import check_choice
    from fred.model.training import MEMORY_CHOICES

    return check_choice("--memory-choice", text, MEMORY_CHOICES)


def add_hardware_arguments(p):
    from fred.model.workload import DEFAULT_NPU, NPU_PRESETS, UTILISATION
    from fred.model.workload import CHOICES, DEFAULT_POLICY

    from .options import choice, integer, name, number

    g = p.add_argument_group("hardware overrides (apply to every workload and fabric alike)")
    g.add_argument("--npu", type=choice("--npu", _npu), metavar="NAME", default=None,
                   help=f"NPU preset: {', '.join(NPU_PRESETS)} (default {DEFAULT_NPU}: 989.4 TFLOP/s, 3 TB/s HBM per "
                        "FRED-SPEC, 80 GB; b200: 2250 TFLOP/s, 8 TB/s, 192 GB); the options below override it")
    g.add_argument("--tflops", type=number("--tflops", MIN_RATE, MAX_TFLOPS), metavar="T",
                   help=f"NPU peak dense FP16 TFLOP/s ({MIN_RATE:g}..{MAX_TFLOPS:g}; default: the preset's)")
    g.add_argument("--utilisation", "--utilization", type=number("--utilisation", MIN_RATE, 1),
                   metavar="U", dest="utilisation",
                   help=f"fraction of peak sustained by compute-bound layers ({MIN_RATE:g}..1; default {UTILISATION}: "
                        "Megatron-LM's measured 52%% of peak, Narayanan et al. SC'21)")
    g.add_argument("--hbm-bw", type=number("--hbm-bw", MIN_RATE, MAX_TBPS), metavar="TBPS",
                   help=f"NPU HBM bandwidth in TB/s ({MIN_RATE:g}..{MAX_TBPS:g}; default: the preset's)")
    g.add_argument("--hbm-gb", type=number("--hbm-gb", MIN_RATE, MAX_HBM_GB), metavar="GB",
                   help=f"NPU HBM capacity in GB ({MIN_RATE:g}..{MAX_HBM_GB:g}; default: the preset's)")
    g.add_argument("--memory", type=choice("--memory", _memory), metavar="POLICY", default=None,
                   help=f"what to do when activations do not fit in HBM: {'|'.join(CHOICES)} (default {DEFAULT_POLICY}: "
                        "the cheapest policy that fits; none: refuse what does not fit)")
    g.add_argument("--memory-choice", type=choice("--memory-choice", _memory_choice), metavar="HOW", default=None,
                   help="whose cheapest policy --memory auto takes in a comparison: shared (default: the mesh's, "
                        "run on every fabric, so the fabrics differ only in the network) or per-fabric (each "
                        "fabric its own; marked in the output)")
    g.add_argument("--npu-bw", type=number("--npu-bw", MIN_RATE, MAX_TBPS), metavar="TBPS",
                   help=f"NPU network bandwidth per direction, TB/s ({MIN_RATE:g}..{MAX_TBPS:g}; default 3)")
    g.add_argument("--mesh-link-bw", type=number("--mesh-link-bw", MIN_RATE, MAX_GBPS), metavar="GBPS",
                   help=f"mesh link bandwidth, GB/s ({MIN_RATE:g}..{MAX_GBPS:g}; default 750)")
    g.add_argument("--io-bw", type=number("--io-bw", MIN_RATE, MAX_GBPS), metavar="GBPS",
                   help=f"I/O controller bandwidth, GB/s ({MIN_RATE:g}..{MAX_GBPS:g}; default 128)")
    g.add_argument("--link-latency-ns", type=number("--link-latency-ns", 0, MAX_LATENCY_NS), metavar="NS",
                   help=f"wafer link latency, ns (0..{MAX_LATENCY_NS:g}; default 20)")
    g.add_argument("--bit-error-rate", type=number("--bit-error-rate", 0, MAX_BER), metavar="BER",
                   help=bit_error_help("every wafer link"))
    g.add_argument("--timing", type=name("--timing"), metavar="FILE", default=None,
                   help="switch timing from a `fred characterize` timing file ('default': the embedded one, "
                        "also the default)")
    from .collective import A2A_HELP, a2a_method

    g.add_argument("--all-to-all-method", "--a2a-method", type=choice("--all-to-all-method", a2a_method),
                   dest="a2a_method", metavar="METHOD", default=None, help=A2A_HELP)
    g.add_argument("--switch-cycles", type=number("--switch-cycles", 0, MAX_CYCLES), metavar="N",
                   help=f"switch traversal latency in cycles (0..{MAX_CYCLES:g}; overrides the timing file's)")
    g.add_argument("--switch-ghz", type=number("--switch-ghz", MIN_RATE, MAX_GHZ), metavar="GHZ",
                   help=f"switch clock in GHz ({MIN_RATE:g}..{MAX_GHZ:g}; default 1)")
    g.add_argument("--granularity", type=integer("--granularity", 1, MAX_GRANULARITY), metavar="N", default=None,
                   help=f"DP buckets per stage in the last microbatch's backward (weight stationary; "
                        f"1..{MAX_GRANULARITY}, default 4)")
    g.add_argument("--stream-steps", type=integer("--stream-steps", 1, MAX_STREAM_STEPS), metavar="N", default=None,
                   help=f"simulated folds per weight-streaming pass (simulation coarsening; 1..{MAX_STREAM_STEPS}, "
                        f"default 4)")
    add_wafer_arguments(p)


def _off_wafer(text):
    from fred.model.collectives import off_wafer_network

    return off_wafer_network(text)


def add_wafer_arguments(p):
    """--wafers and --off-wafer (fred estimate, sweep, scan; docs/training.md "Several wafers")."""
    from fred.model.collectives import DEFAULT_NETWORK, MAX_WAFERS, NETWORKS

    from .options import choice, integer

    g = p.add_argument_group("several wafers (data parallel across wafers, joined through their I/O controllers)")
    g.add_argument("--wafers", type=integer("--wafers", 1, MAX_WAFERS), metavar="W", default=None,
                   help=f"wafers training data-parallel (1..{MAX_WAFERS}, default 1); samples per replica stay per "
                        f"wafer: the global minibatch is W x DP x samples")
    g.add_argument("--off-wafer", type=choice("--off-wafer", _off_wafer), metavar="NAME|FILE.yml", default=None,
                   help=f"off-wafer network: {', '.join(NETWORKS)} or a YAML file (docs/network.md; default "
                        f"{DEFAULT_NETWORK}); needs --wafers 2 or more")


def wafer_options(args) -> dict:
    """{"wafers": W, "off_wafer": network} for the estimate from --wafers and --off-wafer (empty
    for one wafer); --off-wafer without several wafers is refused."""
    from .options import refuse_unused

    w = getattr(args, "wafers", None)
    off = getattr(args, "off_wafer", None)
    if not w or w == 1:
        refuse_unused("--off-wafer", off.name if off is not None else None, "needs --wafers 2 or more")
        return {}
    return {"wafers": w, "off_wafer": off}


def hardware_from_args(args):
    """(WaferParams, NpuParams, {simulation options}) from the common override options."""
    import dataclasses

    from fred import FredError

    from fred.model.workload import compute as C
    from fred.model.system import GB, NS, TB, default_params

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
    if getattr(args, "bit_error_rate", None) is not None:
        ch["bit_error_rate"] = args.bit_error_rate
    if getattr(args, "timing", None):
        from fred.contract.timing import load_timing
        from fred.model.system import switch_timing

        clock = args.switch_ghz * 1e9 if getattr(args, "switch_ghz", None) is not None else None
        ch["switch"] = switch_timing(load_timing(None if args.timing == "default" else args.timing),
                                     clock_hz=clock)
    sw = {}
    if getattr(args, "switch_cycles", None) is not None:
        sw["latency_cycles"] = args.switch_cycles
    if getattr(args, "switch_ghz", None) is not None:
        sw["clock_hz"] = args.switch_ghz * 1e9
    if sw:
        sw["source"] = "command line: " + ", ".join(f"{k}={v}" for k, v in sw.items())
        ch["switch"] = dataclasses.replace(ch.get("switch", p.switch), **sw)
    if getattr(args, "a2a_method", None):
        from .collective import apply_a2a_method

        ch["switch"] = apply_a2a_method(ch.get("switch", p.switch), args.a2a_method)
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
        from fred.model.workload import DEFAULT_POLICY, check_policy
        gran["memory"] = check_policy(args.memory or DEFAULT_POLICY)
    if getattr(args, "memory_choice", None) is not None:
        if gran.get("memory", "auto") != "auto":
            raise ValueError(f"--memory-choice {args.memory_choice} applies to --memory auto only: --memory "
                             f"{gran['memory']} is one policy on every fabric already")
        gran["memory_choice"] = args.memory_choice
    for opt, key in (("granularity", "granularity"), ("stream_steps", "stream_steps")):
        v = getattr(args, opt, None)
        if v is not None:
            if v < 1:
                raise FredError(f"--{opt.replace('_', '-')} must be >= 1, got {v}")
            gran[key] = v
    gran.update(wafer_options(args))
    return p, npu, gran


def _workload(text):
    from fred.model.workload import workload_ref

    return workload_ref(text)


def _fabric(text):
    from fred.model.system import canonical_fabric

    return canonical_fabric(text)


def add_arguments(p):
    from .options import ListOption, choice, integer, name, number

    p.add_argument("--workload", "-w", action=ListOption, item=choice("--workload", _workload), metavar="NAMES",
                   help="workload(s): resnet-152, transformer-17b, gpt3-175b, transformer-1t, mixtral-8x7b, "
                        "deepseek-moe-16b, or a workload YAML file (repeat or comma-separate; default the "
                        "paper's four)")
    p.add_argument("--fabric", "-f", action=ListOption, item=choice("--fabric", _fabric), metavar="NAMES",
                   help="fabric(s): mesh, fred-a, fred-b, fred-c, fred-d, torus, switched, switched-inr (repeat or "
                        "comma-separate; default mesh and fred-a..d; the mesh is always simulated as the reference)")
    p.add_argument("--strategy", "-s", type=name("--strategy"), metavar="MP(a)-DP(b)-PP(c)",
                   help="parallelization (default: each workload's headline strategy; with --trace, derived from "
                        "the trace's header)")
    p.add_argument("--microbatches", type=integer("--microbatches", 1, MAX_MICROBATCHES), metavar="N",
                   help=f"microbatches per iteration (1..{MAX_MICROBATCHES} and at most the samples per replica; "
                        f"default: the workload's)")
    p.add_argument("--samples", type=integer("--samples", 1, MAX_SAMPLES), metavar="N",
                   help=f"samples per DP replica, i.e. minibatch = DP x N (1..{MAX_SAMPLES:,}; default: the "
                        f"workload's, 16)")
    p.add_argument("--mode", choices=("weight-stationary", "weight-streaming"), help="execution mode (default: the workload's)")
    add_hardware_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON (README: JSON output)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the stacked breakdown normalised to the mesh (paper Fig. 10)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    t = p.add_argument_group("ASTRA-sim 1.x text traces (compute from the trace, communication simulated; "
                             "see docs/training.md)")
    t.add_argument("--trace", action="append", type=name("--trace"), metavar="FILE",
                   help="run this trace instead of the built-in workloads (repeat for several)")
    t.add_argument("--trace-clock-ghz", type=number("--trace-clock-ghz", MIN_RATE, MAX_GHZ), metavar="GHZ",
                   default=None, help=f"clock of the trace's cycle counts ({MIN_RATE:g}..{MAX_GHZ:g}; default 1)")
    t.add_argument("--trace-header", type=name("--trace-header"), metavar="TEXT", default=None,
                   help="header line for trace files without one, e.g. 'HYBRID_TRANSFORMER model_parallel_NPU_group: 4'")


def check_microbatches(workloads, microbatches, samples) -> None:
    """--microbatches of at most the samples per replica of every workload (a microbatch holds
    at least one sample), before any simulation."""
    from fred.model.workload import default_workloads, load_workload

    if microbatches is None:
        return
    for wn in workloads or default_workloads():
        w = load_workload(wn)
        b = samples if samples is not None else w.samples_per_replica
        if microbatches > b:
            raise ValueError(f"--microbatches {microbatches} exceeds the {b:g} samples per replica of {w.name} "
                             f"(a microbatch holds at least one sample; raise --samples)")


def check_mode_options(workloads, mode, granularity, stream_steps) -> None:
    """--granularity shapes weight-stationary runs and --stream-steps weight-streaming ones:
    each is refused when no selected workload runs in its mode (before any simulation)."""
    from fred.model.workload import default_workloads, load_workload

    if granularity is None and stream_steps is None:
        return
    modes = {mode or load_workload(wn).mode for wn in (workloads or default_workloads())}
    for opt, value, needs in (("--granularity", granularity, "weight-stationary"),
                              ("--stream-steps", stream_steps, "weight-streaming")):
        if value is not None and needs not in modes:
            raise ValueError(f"{opt} {value} only applies to {needs} runs; these run {', '.join(sorted(modes))} "
                             f"(--mode {needs} runs them so)")


def _fmt_ms(x):
    return f"{x * 1e3:10.3f}"


def npu_line(npu) -> str:
    from fred.model.workload import UTILISATION, UTILISATION_SOURCE

    util = (UTILISATION_SOURCE if npu.utilisation == UTILISATION else f"{npu.utilisation:g} of peak (command line)")
    return (f"NPU: {npu.source}; utilisation {util}; sustained {npu.flops / 1e12:.0f} TFLOP/s, "
            f"{npu.hbm_capacity / 1e9:.0f} GB HBM")


def format_table(rows, timing_source, npu=None) -> str:
    from fred.model.system import variant
    from fred.model.training import PAPER_BAND

    out = [f"switch timing: {timing_source}"] + a2a_lines(rows)
    if npu is not None:
        out.append(npu_line(npu))
    sw = max([18] + [len(e.strategy) for e in rows])
    out.append("times in ms per iteration; compute = compute on the critical path (pipeline fill and drain included), "
               "which with the exposed communication makes the iteration; speedup = mesh / fabric; memory = policy "
               "and GB per NPU with all activations in HBM -> as run")
    if any(e.paper_speedup for e in rows):
        out.append("paper = the paper's speedup for that cell (Fig. 10, FRED-SPEC §7), on an NPU the paper does not "
                   "specify; `fred scan` (and the end of `make run`) finds the NPU speed at which the model comes within "
                   f"{PAPER_BAND:.0%} of it")
    out += memory_line(rows)
    cols = table_cols(rows) + (("inter_wafer",) if any(getattr(e, "wafers", 1) > 1 for e in rows) else ())
    for w in sorted({(e.wafers, e.off_wafer) for e in rows if getattr(e, "wafers", 1) > 1}):
        out.append(f"wafers: {w[0]}, data parallel across wafers on the off-wafer network {w[1]}; "
                   f"inter = exposed inter-wafer gradient exchange")
    hdr = (f"{'workload':16} {'fabric':7} {'strategy':{sw}} {'iter':>10} " + " ".join(f"{COL_TITLES[c]:>10}" for c in cols)
           + f" {'speedup':>8} {'paper':>6}  memory")
    out.append(hdr)
    out.append("-" * len(hdr))
    mesh_policy = {(e.workload, e.strategy): e.memory_policy for e in rows if e.fabric == "mesh"}
    for e in rows:
        vals = [e.critical_path_compute] + [e.exposed.get(c, 0.0) for c in cols[1:]]
        paper = f"{e.paper_speedup:6.2f}" if e.paper_speedup else f"{'':6}"
        sp = f"{e.speedup:8.3f}" if e.speedup is not None else f"{'':8}"
        out.append(f"{e.workload:16} {variant(e.fabric).display:7} {e.strategy:{sw}} {_fmt_ms(e.iteration_time)} "
                   + " ".join(_fmt_ms(v) for v in vals) + f" {sp} {paper}  "
                   + memory_cell(e, mesh_policy.get((e.workload, e.strategy))))
    notes = sorted({f"{e.workload}: {n}" for e in rows for n in e.notes})
    for n in notes:
        out.append(f"note: {n}")
    return "\n".join(out)


#: options of the built-in workloads and of the roofline NPU, which a trace replaces
_NOT_FOR_TRACES = (("workload", "--workload"), ("microbatches", "--microbatches"), ("samples", "--samples"),
                   ("io_bw", "--io-bw"),
                   ("mode", "--mode"), ("plot", "--plot"), ("tflops", "--tflops"), ("utilisation", "--utilisation"),
                   ("hbm_bw", "--hbm-bw"), ("hbm_gb", "--hbm-gb"), ("granularity", "--granularity"),
                   ("stream_steps", "--stream-steps"), ("npu", "--npu"), ("memory", "--memory"),
                   ("wafers", "--wafers"), ("off_wafer", "--off-wafer"), ("memory_choice", "--memory-choice"))


def format_trace_table(rows, timing_source) -> str:
    from fred.model.system import variant

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


#: Estimate.to_dict() key -> JSON key (units in the names); other keys pass through unchanged
_UNITS = {"iteration_time": "iteration_time_s", "compute_time": "compute_time_s",
          "critical_path_compute": "critical_path_compute_s", "exposed": "exposed_s", "comm_busy": "comm_busy_s",
          "memory_per_npu": "memory_per_npu_bytes", "sim_seconds": "sim_wall_s",
          "exposed_comm": "exposed_comm_s", "pipeline_bubble": "pipeline_bubble_s", "beyond_compute": "beyond_compute_s",
          "timing_source": "switch_timing_source", "memory_before": "memory_before_bytes",
          "memory_states": "memory_states_bytes", "offload_bytes": "offload_bytes",
          "recompute_time": "recompute_time_s", "hbm_capacity": "hbm_capacity_bytes",
          "clock_ghz": "clock_GHz"}


def estimate_result(e) -> dict:
    """One estimate (or trace estimate) as a JSON result (units in the key names)."""
    d = e.to_dict()
    if "compute_busy" in d:     # a trace estimate: one meaning of compute_time_s in every JSON (busy compute)
        d["critical_path_compute"] = d["compute_time"]
        d["compute_time"] = d.pop("compute_busy")
    return {_UNITS.get(k, k): v for k, v in d.items()}


def npu_json(npu) -> dict:
    from fred.model.workload import UTILISATION_SOURCE

    return {"name": npu.name, "peak_flops_per_s": npu.peak_flops, "utilisation": npu.utilisation,
            "utilisation_default_source": UTILISATION_SOURCE, "hbm_bandwidth_Bps": npu.hbm_bw,
            "hbm_capacity_bytes": npu.hbm_capacity, "source": npu.source}


def check_strategy(text, params) -> None:
    """--strategy parses and uses every NPU of the wafer (before any work)."""
    from fred.model.collectives import parse_strategy

    if text is not None:
        try:
            parse_strategy(text, params.npus)
        except ValueError as exc:
            raise ValueError(f"--strategy: {exc}") from None


def _run_trace(args):
    import os
    from fred.model.training import DEFAULT_CLOCK_GHZ, resolve_fabrics, trace_table
    from .collective import check_a2a_applies_to_traces
    from .options import refuse_unused

    for attr, opt in _NOT_FOR_TRACES:
        refuse_unused(opt, getattr(args, attr, None), "does not apply to --trace (the trace gives the layers and "
                                                      "their compute times; --trace-clock-ghz sets its clock)")
    seen = {}
    for t in args.trace:     # one file under two spellings would run twice (the parser refuses one spelling)
        key = os.path.realpath(t)
        if key in seen:
            raise ValueError(f"--trace {t!r} is the file {seen[key]!r} again; give each trace once")
        seen[key] = t
    check_a2a_applies_to_traces(args.a2a_method, args.trace, resolve_fabrics(args.fabric), args.trace_header)
    params, _, _ = hardware_from_args(args)
    clock = DEFAULT_CLOCK_GHZ if args.trace_clock_ghz is None else args.trace_clock_ghz
    rows = trace_table(args.trace, args.fabric, args.strategy, clock, header=args.trace_header, params=params)
    source = rows[0].timing_source if rows else params.switch.source
    if args.json:
        from .jsonout import document, dumps

        traces = []
        for e in rows:
            if all(t["path"] != e.trace for t in traces):
                traces.append({"path": e.trace, "kind": e.kind, "header": e.header, "header_source": e.header_source,
                               "layers": e.layers, "strategy": e.strategy, "placement": e.placement})
        print(dumps(document("estimate-trace", [estimate_result(e) for e in rows], switch_timing_source=source,
                             trace_clock_GHz=clock, traces=traces)))
    else:
        print(links_line(params) + format_trace_table(rows, source))
    return 0


def links_line(params) -> str:
    """With a bit-error rate: the line saying how the wafer links are derated (else nothing)."""
    if not params.bit_error_rate:
        return ""
    return (f"links: bit-error rate {params.bit_error_rate:g} on every wafer link, payload derated by the "
            f"Go-Back-N goodput {params.bit_error_goodput:.6f} measured on the switch RTL\n")


def run(args):
    from fred import progress
    from fred.contract.outputs import check_output_path
    from fred.model.training import ALL_FABRICS, estimate_table, resolve_fabrics, resolve_workloads
    from fred.model.plots import PLOT_SUFFIXES

    from .collective import check_a2a_applies
    from .options import refuse_unused

    if getattr(args, "trace", None):
        return _run_trace(args)
    refuse_unused("--trace-clock-ghz", args.trace_clock_ghz, "needs --trace FILE")
    refuse_unused("--trace-header", args.trace_header, "needs --trace FILE")
    if args.plot is not None:
        check_output_path("--plot", args.plot, suffixes=PLOT_SUFFIXES)
    params, npu, gran = hardware_from_args(args)
    check_strategy(args.strategy, params)
    workloads = resolve_workloads(args.workload)
    check_microbatches(workloads, args.microbatches, args.samples)
    check_mode_options(workloads, args.mode, args.granularity, args.stream_steps)
    fabrics = resolve_fabrics(args.fabric)
    check_a2a_applies(args.a2a_method, workloads, fabrics, args.strategy)
    kw = dict(params=params, npu=npu, microbatches=args.microbatches, samples_per_replica=args.samples, mode=args.mode)
    kw.update(gran)
    steps = len(workloads) * len(set(fabrics) | {"mesh"})
    with progress.Progress(steps, "fred estimate", progress.enabled(args.quiet), unit="estimate") as bar:
        rows = estimate_table(workloads, fabrics, args.strategy, progress=bar.start, **kw)
    source = rows[0].timing_source if rows else params.switch.source
    if args.plot is not None:
        from fred.model.plots import plot_breakdown
        plot_breakdown(rows, args.plot, footnote=f"NPU {npu.flops / 1e12:,.0f} TFLOP/s sustained, {npu.hbm_bw / 1e12:g} TB/s "
                       f"HBM ({npu.source}); switch timing: {source}")
    if args.json:
        from .jsonout import document, dumps

        print(dumps(document("estimate", [estimate_result(e) for e in rows], switch_timing_source=source,
                             npu=npu_json(npu), memory_policy_requested=gran.get("memory"),
                             memory_choice=gran.get("memory_choice", "shared") if gran.get("memory") == "auto" else None,
                             fabrics=[f for f in ALL_FABRICS if f in fabrics])))
    else:
        print(links_line(params) + format_table(rows, source, npu))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0
