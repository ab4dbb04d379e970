"""``fred infer``: LLM inference on the wafer -- prefill and decode of a decoder transformer, mesh
vs Fred-A..D (time to first token, time per output token, tokens per second, exposed
communication per kind)."""

from __future__ import annotations

HELP = "LLM inference (prefill and decode) for each workload x fabric: TTFT, time per output token, tokens/s"

#: the bundled model served when no --workload is given
DEFAULT_WORKLOAD = "llama2-70b"
DEFAULT_PROMPT = 1024
DEFAULT_OUTPUT = 256


def _workload(text):
    from fred.model.workload import load_workload, workload_ref

    ref = workload_ref(text)
    kind = load_workload(ref).kind
    if kind != "transformer":
        raise ValueError(f"--workload {text!r} is a {kind} model: fred infer serves decoder transformers")
    return ref


def _fabric(text):
    from fred.model.system import canonical_fabric

    return canonical_fabric(text)


def _npu(text):
    from fred.contract.checks import check_choice
    from fred.model.workload import NPU_PRESETS

    return check_choice("--npu", text, tuple(NPU_PRESETS))


def add_arguments(p):
    from fred.model.inference import MAX_BATCH, MAX_TOKENS
    from fred.model.workload import DEFAULT_NPU, NPU_PRESETS

    from .options import ListOption, choice, integer, name

    p.add_argument("--workload", "-w", action=ListOption, item=choice("--workload", _workload), metavar="NAMES",
                   help=f"decoder transformer(s): llama2-70b, gpt3-175b, transformer-17b, transformer-1t, the "
                        f"mixture-of-experts mixtral-8x7b and deepseek-moe-16b, or a "
                        f"workload YAML file (repeat or comma-separate; default {DEFAULT_WORKLOAD})")
    p.add_argument("--fabric", "-f", action=ListOption, item=choice("--fabric", _fabric), metavar="NAMES",
                   help="fabric(s): mesh, fred-a, fred-b, fred-c, fred-d (repeat or comma-separate; default all; "
                        "the mesh is always simulated as the reference)")
    p.add_argument("--strategy", "-s", type=name("--strategy"), metavar="MP(a)-DP(b)-PP(c)",
                   help="split over the 20 NPUs: MP = tensor parallel, DP = independent replicas serving "
                        "separate batches, PP = pipeline stages, EP(e) (mixture-of-experts models) = each "
                        "MoE layer's experts over e replicas, tokens exchanged by all-to-all, e.g. "
                        "MP(1)-EP(4)-DP(5)-PP(1) (default MP(4)-DP(5)-PP(1), or MP(4)-DP(1)-PP(5) when that "
                        "does not fit in HBM)")
    p.add_argument("--batch", type=integer("--batch", 1, MAX_BATCH), metavar="N", default=1,
                   help=f"sequences per replica (1..{MAX_BATCH:,}; default 1; a step costs the same to simulate "
                        f"at any batch, HBM bounds it first)")
    p.add_argument("--prompt-tokens", type=integer("--prompt-tokens", 1, MAX_TOKENS), metavar="N",
                   default=DEFAULT_PROMPT,
                   help=f"prompt tokens per sequence (1..{MAX_TOKENS:,}, and with --output-tokens within the "
                        f"model's context window; default {DEFAULT_PROMPT})")
    p.add_argument("--output-tokens", type=integer("--output-tokens", 2, MAX_TOKENS,
                                                   why="the time per output token is the time between two"),
                   metavar="N", default=DEFAULT_OUTPUT,
                   help=f"output tokens per sequence (2..{MAX_TOKENS:,}: the time per output token needs two; "
                        f"default {DEFAULT_OUTPUT})")
    p.add_argument("--npu", type=choice("--npu", _npu), metavar="NAME", default=None,
                   help=f"NPU preset: {', '.join(NPU_PRESETS)} (default {DEFAULT_NPU}: 989.4 TFLOP/s, 3 TB/s HBM "
                        "per FRED-SPEC, 80 GB)")
    p.add_argument("--timing", type=name("--timing"), metavar="FILE", default=None,
                   help="switch timing from a `fred characterize` timing file ('default': the embedded one, "
                        "also the default)")
    from .collective import A2A_HELP, a2a_method

    p.add_argument("--all-to-all-method", "--a2a-method", type=choice("--all-to-all-method", a2a_method),
                   dest="a2a_method", metavar="METHOD", default=None, help=A2A_HELP)
    p.add_argument("--json", action="store_true", help="print JSON (README: JSON output)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="draw time to first token and time per output token per fabric, stacked by kind")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _fmt(x, scale=1e3, width=9, digits=3):
    return f"{x * scale:{width}.{digits}f}"


def format_table(rows, source, npu_text) -> str:
    from fred.model.system import variant

    out = [f"switch timing: {source}", npu_text]
    seen = set()
    for r in rows:
        if r.workload not in seen:
            seen.add(r.workload)
            m = r.memory
            out.append(f"{r.workload} {r.strategy}: {r.replicas} replica(s) x batch {r.batch}, prompt "
                       f"{r.prompt_tokens} + output {r.output_tokens} tokens; per NPU: weights "
                       f"{m['weights'] / 1e9:.1f} GB + KV cache {m['kv_cache'] / 1e9:.2f} GB + working set "
                       f"{m['working'] / 1e9:.2f} GB")
    out.append("TTFT = prefill; TPOT = mean decode step; exposed communication on the critical path "
               "(MP All-Reduce, PP send, EP all-to-all); speedup = mesh / fabric")
    hdr = (f"{'workload':12} {'fabric':7} {'TTFT ms':>9} {'MP ms':>9} {'PP ms':>9} {'EP ms':>9} {'TPOT ms':>9} "
           f"{'MP us':>9} {'PP us':>9} {'EP us':>9} {'tokens/s':>10} {'TTFT x':>7} {'TPOT x':>7}")
    out += [hdr, "-" * len(hdr)]
    for r in rows:
        sp = [f"{x:7.4f}" if x is not None else f"{'':7}" for x in (r.speedup_ttft, r.speedup_tpot)]
        pre, dec = r.prefill_exposed, r.decode_exposed
        out.append(f"{r.workload:12} {variant(r.fabric).display:7} {_fmt(r.ttft)} {_fmt(pre['mp'])} {_fmt(pre['pp'])} "
                   f"{_fmt(pre['ep'])} {_fmt(r.tpot, digits=4)} {_fmt(dec['mp'], 1e6, 9, 2)} "
                   f"{_fmt(dec['pp'], 1e6, 9, 2)} {_fmt(dec['ep'], 1e6, 9, 2)} "
                   f"{r.tokens_per_s:10.1f} {sp[0]} {sp[1]}")
    return "\n".join(out)


def result_json(r) -> dict:
    """One run as a JSON result (units in the key names)."""
    return {"workload": r.workload, "fabric": r.fabric, "strategy": r.strategy, "replicas": r.replicas,
            "batch": r.batch, "prompt_tokens": r.prompt_tokens, "output_tokens": r.output_tokens,
            "time_to_first_token_s": r.ttft, "time_per_output_token_s": r.tpot, "tokens_per_s": r.tokens_per_s,
            "prefill": {"compute_s": r.prefill_compute, "exposed_s": dict(r.prefill_exposed)},
            "decode": {"compute_s": r.decode_compute, "exposed_s": dict(r.decode_exposed)},
            "speedup_ttft": r.speedup_ttft, "speedup_tpot": r.speedup_tpot,
            "memory_per_npu_bytes": dict(r.memory), "preemptions": r.preemptions,
            "switch_timing_source": r.timing_source, "sim_cpu_s": r.sim_seconds}


def run(args):
    from fred import progress
    from fred.contract.outputs import check_output_path
    from fred.model.inference import infer_table, plan
    from fred.model.plots import PLOT_SUFFIXES
    from fred.model.training import FABRIC_ORDER, resolve_fabrics

    from .estimate import check_strategy, hardware_from_args, npu_json, npu_line

    if args.plot is not None:
        check_output_path("--plot", args.plot, suffixes=PLOT_SUFFIXES)
    params, npu, _ = hardware_from_args(args)
    check_strategy(args.strategy, params)
    workloads = list(args.workload or [DEFAULT_WORKLOAD])
    fabrics = resolve_fabrics(args.fabric)
    from .collective import check_a2a_applies

    check_a2a_applies(args.a2a_method, workloads, fabrics, args.strategy)
    sizes = dict(batch=args.batch, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens)
    for wn in workloads:   # every refusal (kind, context window, HBM) before any simulation
        plan(wn, args.strategy, params=params, npu=npu, **sizes)
    steps = len(workloads) * len(set(fabrics) | {"mesh"})
    with progress.Progress(steps, "fred infer", progress.enabled(args.quiet), unit="run") as bar:
        rows = infer_table(workloads, fabrics, args.strategy, progress=bar.start, params=params, npu=npu, **sizes)
    source = rows[0].timing_source if rows else params.switch.source
    if args.plot is not None:
        from fred.model.inference import plot_inference

        plot_inference(rows, args.plot, footnote=f"NPU {npu.source}; switch timing: {source}")
    if args.json:
        from .jsonout import document, dumps

        print(dumps(document("infer", [result_json(r) for r in rows], switch_timing_source=source,
                             npu=npu_json(npu), fabrics=[f for f in FABRIC_ORDER if f in fabrics])))
    else:
        print(format_table(rows, source, npu_line(npu)))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0
