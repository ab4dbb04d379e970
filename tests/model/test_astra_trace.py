"""ASTRA-sim 1.x text traces: reader (every example file, bad files, property tests) and runs
on the wafer (mechanism checks, no frozen numbers)."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fred import FredError
from fred.model.inputs.astra_trace import COMM_TYPES, FIELDS, KINDS, load_trace, parse_trace, trace_header
from fred.model.collectives import collective_time
from fred.model.training import COMM_OPS, estimate_trace, resolve_strategy, trace_table

EXAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "workloads" / "astra-sim"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.txt")) if EXAMPLES.is_dir() else []
needs_examples = pytest.mark.skipif(not EXAMPLE_FILES, reason=f"example traces not found at {EXAMPLES}")

#: headers for the example files that have none (LIBRA's inputs; docs/training.md says why)
GIVEN_HEADERS = {"GPT_3": "HYBRID_TRANSFORMER model_parallel_NPU_group: 4",
                 "MSFT_1T": "HYBRID_TRANSFORMER model_parallel_NPU_group: 20",
                 "Turing_NLG": "DATA"}


def _lines(path):
    return [ln for ln in path.read_text().splitlines() if ln.split()]


def _has_header(path):
    return _lines(path)[0].split()[0] in KINDS


def _load_example(path):
    return load_trace(path, header=None if _has_header(path) else GIVEN_HEADERS[path.stem])


LAYER = "L{i} -1 {f} {fc} {fb} {ig} {igc} {igb} {wg} {wgc} {wgb} {u}"


def layer(i=0, f=1000, fc="NONE", fb=0, ig=1000, igc="NONE", igb=0, wg=1000, wgc="NONE", wgb=0, u=0):
    return LAYER.format(i=i, f=f, fc=fc, fb=fb, ig=ig, igc=igc, igb=igb, wg=wg, wgc=wgc, wgb=wgb, u=u)


def trace_text(kind, layers):
    return "\n".join([kind, str(len(layers))] + list(layers)) + "\n"


# ---- reading the example files -----------------------------------------------------------------

@needs_examples
@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_file_parses(path):
    lines = _lines(path)
    t = _load_example(path)
    n_layers = len(lines) - (2 if _has_header(path) else 0)
    assert len(t.layers) == n_layers
    assert t.path == str(path) and t.name == path.stem
    # every number of every layer line is read as written
    for lay, ln in zip(t.layers, lines[-n_layers:]):
        tok = ln.split()
        assert lay.name == tok[0]
        assert [lay.fwd_cycles, lay.fwd_bytes, lay.ig_cycles, lay.ig_bytes, lay.wg_cycles, lay.wg_bytes,
                lay.update_cycles] == [int(tok[k]) for k in (2, 4, 5, 7, 8, 10, 11)]
        assert [lay.fwd_comm, lay.ig_comm, lay.wg_comm] == [tok[3], tok[6], tok[9]]
    if _has_header(path):
        assert t.header.kind == lines[0].split()[0] and not t.header.given
    else:
        assert t.header.given


@needs_examples
@pytest.mark.parametrize("path", [p for p in EXAMPLE_FILES if not _has_header(p)], ids=lambda p: p.name)
def test_headerless_example_needs_a_header(path):
    with pytest.raises(FredError, match=r"line 1, field kind: no header") as exc:
        load_trace(path)
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)


@needs_examples
@pytest.mark.parametrize("path", [p for p in EXAMPLE_FILES if _has_header(p)], ids=lambda p: p.name)
def test_header_given_for_a_file_with_one_is_refused(path):
    with pytest.raises(FredError, match=r"line 1, field kind: the file has its own header"):
        load_trace(path, header="DATA")


# ---- running the example files ------------------------------------------------------------------

@pytest.fixture(scope="module")
def example_runs():
    out = {}
    for path in EXAMPLE_FILES:
        t = _load_example(path)
        out[path.stem] = (t, {f: estimate_trace(path, f, trace=t) for f in ("mesh", "fred-d")})
    return out


@needs_examples
@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_runs_on_mesh_and_fred_d(path, example_runs):
    t, runs = example_runs[path.stem]
    data_loop = t.kind in ("DATA", "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED")
    # the trace's compute, verbatim: ASTRA-sim's data-parallel loop computes no input gradient for layer 0
    cycles = t.total_cycles() - (t.layers[0].ig_cycles if data_loop else 0)
    for f, e in runs.items():
        assert e.trace == str(path) and e.workload == path.stem and e.fabric == f
        assert math.isclose(e.compute_busy, cycles / 1e9, rel_tol=1e-12)
        # the critical path: compute + exposed communication = iteration time
        assert math.isclose(e.compute_time + e.exposed_comm, e.iteration_time, rel_tol=1e-9)
        assert e.iteration_time >= e.compute_busy * (1 - 1e-12)     # one NPU computes one thing at a time
        assert e.iteration_time >= e.compute_time * (1 - 1e-12)
        assert all(v >= 0 for v in e.exposed.values())
        assert set(e.exposed) == {"mp", "dp"}
    a, b, _ = resolve_strategy(t)[0]
    has_dp = b > 1 and any(l.wg_comm != "NONE" and l.wg_bytes for l in t.layers) and t.kind != "MODEL"
    if has_dp:
        # in-switch reduction: FRED-D's DP collectives are never more exposed than the mesh's
        assert runs["fred-d"].exposed["dp"] <= runs["mesh"].exposed["dp"] * (1 + 1e-9)
        assert runs["mesh"].comm_busy["dp"] > 0


@needs_examples
def test_data_trace_iteration_at_least_its_compute(example_runs):
    t, runs = example_runs["Resnet50_DataParallel"]
    assert t.kind == "DATA"
    for e in runs.values():
        assert e.strategy == "MP(1)-DP(20)-PP(1)"
        assert e.iteration_time >= e.compute_busy
        assert e.exposed["mp"] == 0.0


@needs_examples
def test_doubling_the_clock_halves_compute():
    path = EXAMPLES / "Transformer_HybridParallel.txt"
    if not path.exists():
        pytest.skip("Transformer_HybridParallel.txt not there")
    e1 = estimate_trace(path, "fred-d", clock_ghz=1.0)
    e2 = estimate_trace(path, "fred-d", clock_ghz=2.0)
    assert e1.clock_ghz == 1.0 and e2.clock_ghz == 2.0
    assert math.isclose(e2.compute_busy, e1.compute_busy / 2, rel_tol=1e-12)
    assert e2.iteration_time < e1.iteration_time


@needs_examples
def test_trace_table_speedup_relative_to_mesh():
    path = EXAMPLES / "MLP_HybridParallel_Data_Model.txt"
    if not path.exists():
        pytest.skip("MLP_HybridParallel_Data_Model.txt not there")
    rows = trace_table([path], fabrics=["fred-b", "mesh"])
    assert [r.fabric for r in rows] == ["fred-b", "mesh"]
    mesh = rows[1]
    assert mesh.speedup == 1.0
    assert math.isclose(rows[0].speedup, mesh.iteration_time / rows[0].iteration_time)
    assert rows[0].strategy == "MP(4)-DP(5)-PP(1)"


# ---- semantics on small synthetic traces ------------------------------------------------------

@pytest.mark.parametrize("typ", sorted(COMM_OPS))
@pytest.mark.parametrize("fabric", ["mesh", "fred-d"])
def test_comm_types_run_as_their_collective(typ, fabric):
    """A MODEL trace of one layer whose only work is one forward collective takes exactly that
    collective's time over the 20 NPUs (with the pieces the training schedule uses, "plan")."""
    nbytes = 1 << 22
    t = parse_trace(trace_text("MODEL", [layer(f=0, fc=typ, fb=nbytes, ig=0, wg=0)]), name="one.txt")
    e = estimate_trace(None, fabric, trace=t)
    ref = collective_time(fabric, COMM_OPS[typ], list(range(20)), nbytes, chunks="plan").time
    assert math.isclose(e.iteration_time, ref, rel_tol=1e-9), (e.iteration_time, ref)
    assert math.isclose(e.exposed["mp"], ref, rel_tol=1e-9)


def test_update_delay_follows_each_collective():
    base = [layer(f=0, fc="ALLREDUCE", fb=1 << 20, ig=0, wg=0)]
    slow = [layer(f=0, fc="ALLREDUCE", fb=1 << 20, ig=0, wg=0, u=5000)]
    e0 = estimate_trace(None, "mesh", trace=parse_trace(trace_text("MODEL", base)))
    e1 = estimate_trace(None, "mesh", trace=parse_trace(trace_text("MODEL", slow)))
    assert math.isclose(e1.iteration_time - e0.iteration_time, 5000e-9, rel_tol=1e-9)
    # a layer without a collective has no update delay
    e2 = estimate_trace(None, "mesh", trace=parse_trace(trace_text("MODEL", [layer(u=5000)])))
    assert math.isclose(e2.iteration_time, 3000e-9, rel_tol=1e-12)


def test_data_ignores_forward_and_input_gradient_collectives():
    lays = [layer(i, fc="ALLREDUCE", fb=1 << 20, igc="ALLGATHER", igb=1 << 20) for i in range(3)]
    e = estimate_trace(None, "mesh", trace=parse_trace(trace_text("DATA", lays)))
    assert e.comm_busy["mp"] == 0.0 and e.comm_busy["dp"] == 0.0
    # 3 forwards, 3 weight gradients, 2 input gradients (none for layer 0), nothing else
    assert math.isclose(e.iteration_time, 8000e-9, rel_tol=1e-12)
    assert any("not run" in n for n in e.notes)


def test_weight_gradient_collectives_overlap_backward():
    """DP collectives are issued as each layer's weight gradient is ready and overlap the rest
    of the backward: the iteration is shorter than compute + every collective in series."""
    lays = [layer(i, f=20000, ig=20000, wg=20000, wgc="ALLREDUCE", wgb=1 << 22) for i in range(4)]
    t = parse_trace(trace_text("DATA", lays))
    e = estimate_trace(None, "mesh", trace=t)
    one = collective_time("mesh", "all-reduce", list(range(20)), 1 << 22).time
    assert e.iteration_time < e.compute_busy + 4 * one
    assert e.iteration_time >= e.compute_busy + one * (1 - 1e-9)     # the last one is exposed


def test_recomputation_adds_the_recomputed_forward():
    lays = [layer(i, f=1000 * (i + 1), fc="ALLREDUCE", fb=1 << 18, igc="ALLREDUCE", igb=1 << 18,
                  wgc="ALLREDUCE", wgb=1 << 18) for i in range(4)]
    plain = parse_trace(trace_text("HYBRID_TRANSFORMER model_parallel_NPU_group: 2", lays))
    rec = parse_trace(trace_text("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 "
                                 "checkpoints: 2 0 2 checkpoint_initiates: 2 1 3", lays))
    e0, e1 = (estimate_trace(None, "fred-d", trace=t) for t in (plain, rec))
    # layer 1 recomputes layer 0 (1000 cycles), layer 3 recomputes layer 2 (3000 cycles)
    assert math.isclose(e1.compute_busy - e0.compute_busy, 4000e-9, rel_tol=1e-9)
    assert e1.comm_busy["mp"] > e0.comm_busy["mp"]       # the recomputed forwards' collectives too
    assert e1.iteration_time > e0.iteration_time


def test_dlrm_all_to_all_over_all_npus():
    lays = [layer(0, fc="ALLTOALL", fb=1 << 22, igc="ALLTOALL", igb=1 << 22, wgc="ALLREDUCE", wgb=1 << 20)]
    lays += [layer(i) for i in range(1, 5)]
    t = parse_trace(trace_text("HYBRID_DLRM 2", lays))
    assert t.header.last_bottom_layer == 2
    e = estimate_trace(None, "mesh", trace=t)
    assert e.strategy == "MP(1)-DP(20)-PP(1)"
    a2a = collective_time("mesh", "all-to-all", list(range(20)), 1 << 22).time
    assert e.comm_busy["mp"] >= 2 * a2a * (1 - 1e-9)      # forward and input-gradient all-to-alls
    assert e.comm_busy["dp"] > 0


def test_strategy_rules():
    data = parse_trace(trace_text("DATA", [layer()]), name="d.txt")
    assert resolve_strategy(data)[0] == (1, 20, 1)
    with pytest.raises(FredError, match=r"d\.txt: DATA .* must be MP\(1\)-DP\(20\)-PP\(1\), not MP\(2\)-DP\(10\)"):
        resolve_strategy(data, "MP(2)-DP(10)")
    model = parse_trace(trace_text("MODEL", [layer()]))
    assert resolve_strategy(model)[0] == (20, 1, 1)
    tr = parse_trace(trace_text("HYBRID_TRANSFORMER model_parallel_NPU_group: 4", [layer()]), name="t.txt")
    assert resolve_strategy(tr)[0] == (4, 5, 1)
    assert resolve_strategy(tr, "MP(4)-DP(5)")[0] == (4, 5, 1)
    with pytest.raises(FredError, match=r"model_parallel_NPU_group: 4.*not MP\(2\)-DP\(10\)-PP\(1\)"):
        resolve_strategy(tr, "MP(2)-DP(10)")
    with pytest.raises(FredError, match=r"PP\(2\)"):
        resolve_strategy(tr, "MP(2)-DP(5)-PP(2)")
    with pytest.raises(FredError, match=r"uses 10 NPUs, not 20"):
        resolve_strategy(tr, "MP(2)-DP(5)")
    odd = parse_trace(trace_text("HYBRID_TRANSFORMER model_parallel_NPU_group: 3", [layer()]))
    with pytest.raises(FredError, match=r"model_parallel_NPU_group: 3 does not divide the wafer's 20 NPUs"):
        resolve_strategy(odd)
    nogroup = parse_trace(trace_text("HYBRID_TRANSFORMER", [layer()]))
    with pytest.raises(FredError, match=r"no model_parallel_NPU_group; pass a strategy"):
        resolve_strategy(nogroup)
    assert resolve_strategy(nogroup, "MP(10)-DP(2)")[0] == (10, 2, 1)
    dm = parse_trace(trace_text("HYBRID_DATA_MODEL", [layer()]))
    md = parse_trace(trace_text("HYBRID_MODEL_DATA", [layer()]))
    assert resolve_strategy(dm) == ((4, 5, 1), "MP inner (NPU = mp + a*dp)")
    assert resolve_strategy(md) == ((5, 4, 1), "DP inner (NPU = dp + b*mp)")
    assert resolve_strategy(dm, "MP(2)-DP(10)")[0] == (2, 10, 1)


def test_model_data_places_dp_on_consecutive_npus():
    """HYBRID_MODEL_DATA: DP groups are the 4 NPUs of one L1 switch, so a DP all-reduce stays
    inside one L1 -- on Fred-A (thin L1-L2 links) it is as fast as on Fred-C; HYBRID_DATA_MODEL's
    DP groups cross every L1."""
    lays = [layer(i, f=0, ig=0, wg=0, wgc="ALLREDUCE", wgb=1 << 24) for i in range(2)]
    md = parse_trace(trace_text("HYBRID_MODEL_DATA", lays))
    dm = parse_trace(trace_text("HYBRID_DATA_MODEL", lays))
    md_a, md_c = (estimate_trace(None, f, trace=md).iteration_time for f in ("fred-a", "fred-c"))
    dm_a, dm_c = (estimate_trace(None, f, trace=dm).iteration_time for f in ("fred-a", "fred-c"))
    assert math.isclose(md_a, md_c, rel_tol=1e-9)
    assert dm_a > dm_c * 1.5


def test_clock_validation():
    t = parse_trace(trace_text("DATA", [layer()]))
    for bad in (0, -1, float("nan"), float("inf"), "fast"):
        with pytest.raises(FredError, match="trace clock"):
            estimate_trace(None, "mesh", clock_ghz=bad, trace=t)


def test_trace_header_helper():
    assert trace_header("HYBRID_TRANSFORMER", 4) == "HYBRID_TRANSFORMER model_parallel_NPU_group: 4"
    with pytest.raises(FredError, match=r"field model_parallel_NPU_group: '0' is not a positive integer"):
        trace_header("HYBRID_TRANSFORMER", 0)
    with pytest.raises(FredError, match=r"unknown parallelism kind 'PIPELINE'"):
        trace_header("PIPELINE")


def test_given_header_with_layer_count(tmp_path):
    p = tmp_path / "body.txt"
    p.write_text("\n".join(layer(i) for i in range(3)) + "\n")
    assert len(load_trace(p, header="DATA\n3").layers) == 3
    with pytest.raises(FredError, match=r"header given by the caller, field layer count: says 4 layers but the file has 3"):
        load_trace(p, header="DATA\n4")


# ---- bad files: one line naming file, line and field ---------------------------------------------

GOOD = layer()
BAD = [
    ("", r"line 1: empty file"),
    ("\n \t\n", r"line 1: empty file"),
    ("DATA\n", r"line 2, field layer count: missing"),
    ("DATA\nsix\n" + GOOD, r"line 2, field layer count: 'six' is not a non-negative integer"),
    ("DATA\n2 3\n" + GOOD, r"line 2, field layer count: expected one integer"),
    ("DATA\n2\n" + GOOD + "\n", r"line 2, field layer count: says 2 layers but the file has 1 layer lines"),
    ("DATA\n0\n", r"line 2, field layer count: the trace has no layers"),
    ("DATA\n1\n" + GOOD + "\n" + GOOD, r"line 2, field layer count: says 1 layers but the file has 2"),
    ("DATA\n1\nconv1 -1 10 NONE 0 10 NONE 0 10 NONE 0",
     r"line 3, field 12 \(update delay cycles\): missing: a layer line has 12 fields, this one 11"),
    ("DATA\n1\n" + GOOD + " 7", r"line 3, field 13: unexpected extra value '7'"),
    ("DATA\n1\nconv1 -1 1.5 NONE 0 10 NONE 0 10 NONE 0 1",
     r"line 3, field 3 \(forward compute cycles\): '1.5' is not a non-negative integer"),
    ("DATA\n1\nconv1 -1 -10 NONE 0 10 NONE 0 10 NONE 0 1",
     r"line 3, field 3 \(forward compute cycles\): '-10' is not a non-negative integer"),
    ("DATA\n1\nconv1 -1 10 BROADCAST 0 10 NONE 0 10 NONE 0 1",
     r"line 3, field 4 \(forward comm type\): unknown comm type 'BROADCAST'"),
    ("DATA\n1\nconv1 -1 10 NONE 0 10 NONE 0 10 ALLREDUCE -4096 1",
     r"line 3, field 11 \(weight-gradient comm bytes\): '-4096' is not a non-negative integer"),
    ("DATA\n1\nconv1 x 10 NONE 0 10 NONE 0 10 NONE 0 1", r"line 3, field 2 \(reserved\): 'x' is not an integer"),
    ("DATA\n1\nconv1 -1 10 NONE 0 10 NONE 0 10 NONE 0 99999999999999999999",
     r"line 3, field 12 \(update delay cycles\): .* out of range"),
    ("PIPELINE\n1\n" + GOOD, r"line 1, field kind: no header: 'PIPELINE' is not a parallelism kind"),
    ("HYBRID_CUSTOMIZED\n1\n" + GOOD, r"line 1, field kind: parallelism HYBRID_CUSTOMIZED is not supported"),
    ("HYBRID_TRANSFORMER model_parallel_NPU_group:\n1\n" + GOOD,
     r"line 1, field model_parallel_NPU_group: expected one positive integer, got 0 values"),
    ("HYBRID_TRANSFORMER model_parallel_NPU_group: four\n1\n" + GOOD,
     r"line 1, field model_parallel_NPU_group: 'four' is not a positive integer"),
    ("HYBRID_TRANSFORMER 4\n1\n" + GOOD, r"line 1, field header: unexpected value '4'"),
    ("HYBRID_DLRM\n1\n" + GOOD, r"line 1, field last bottom layer: HYBRID_DLRM needs the index"),
    ("HYBRID_DLRM 5\n1\n" + GOOD, r"line 1, field last bottom layer: layer index 5 out of range"),
    ("HYBRID_TRANSFORMER_FWD_IN_BCKWD checkpoints: 2 0\n1\n" + GOOD,
     r"line 1, field checkpoints: says 2 layer indices but lists 1"),
    ("HYBRID_TRANSFORMER_FWD_IN_BCKWD checkpoints: 1 1 checkpoint_initiates: 1 0\n2\n" + GOOD + "\n" + GOOD,
     r"line 1, field checkpoint_initiates: layer 0 starts a recomputation but no checkpoint"),
    ("DATA checkpoints: 1 0\n1\n" + GOOD, r"line 1, field checkpoints: recomputation checkpoints need"),
    ("\n\nDATA\n1\nc -1 10 NONE 0 10 NONE 0 10 NONE 0\n", r"line 5, field 12"),      # blank lines keep numbering
    ("DATA\r\n1\r\nc\t-1\t10\tNONE\t0\t10\tNONE\t0\t10\tNONE\t0\t\t\r\n", r"line 3, field 12"),
]


@pytest.mark.parametrize("text, pattern", BAD)
def test_bad_trace_is_one_line_naming_file_line_field(tmp_path, text, pattern):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(FredError) as exc:
        load_trace(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: line "), msg
    assert "\n" not in msg
    import re
    assert re.search(pattern, msg), msg


def test_load_trace_file_errors(tmp_path):
    with pytest.raises(FredError, match="does not exist"):
        load_trace(tmp_path / "nope.txt")
    with pytest.raises(FredError, match="is a directory"):
        load_trace(tmp_path)
    p = tmp_path / "bin.txt"
    p.write_bytes(b"DATA\n1\n\xff\xfe\n")
    with pytest.raises(FredError, match=r"bin\.txt: line 3: not UTF-8 text"):
        load_trace(p)


def test_tabs_crlf_and_case_are_accepted():
    text = "data\t\t\r\n1\t\t\r\nconv1\t-1\t10\tnone\t0\t10\tNone\t0\t10\tallreduce\t4096\t1\t\t\r\n"
    t = parse_trace(text, name="crlf.txt")
    assert t.kind == "DATA" and t.layers[0].wg_comm == "ALLREDUCE" and t.layers[0].wg_bytes == 4096


# ---- property tests ------------------------------------------------------------------------------

TOKENS = st.sampled_from(list(KINDS) + list(COMM_TYPES) + [
    "HYBRID_CUSTOMIZED", "MICRO", "model_parallel_NPU_group:", "checkpoints:", "checkpoint_initiates:",
    "ep:", ":", "a:b", "-1", "0", "1", "2", "3", "12", "-7", "1.5", "1e3", "99999999999999999999999",
    "x", "layer", "\u0663", "+4", "1_000"])
LINE = st.lists(st.one_of(TOKENS, st.integers(-5, 10 ** 6).map(str)), max_size=14).map(
    lambda toks: "\t".join(toks))


def _parse_or_error(text, header=None):
    try:
        t = parse_trace(text, name="prop.txt", header=header)
    except FredError as exc:
        msg = str(exc)
        assert msg.startswith("prop.txt: ") and "\n" not in msg, msg
        return None
    assert t.layers and t.kind in KINDS
    return t


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_parses_or_is_a_fred_error(text):
    _parse_or_error(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, max_size=8), st.sampled_from(["\n", "\r\n"]),
       st.one_of(st.none(), TOKENS, st.text(max_size=30)))
def test_token_soup_parses_or_is_a_fred_error(lines, eol, header):
    _parse_or_error(eol.join(lines), header=header)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_load_or_fred_error(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("prop") / "t.txt"
    p.write_bytes(data)
    try:
        load_trace(p)
    except FredError as exc:
        assert "\n" not in str(exc)


PHASE = st.tuples(st.integers(0, 10 ** 6), st.sampled_from(COMM_TYPES), st.integers(0, 1 << 24))
LAYERS = st.lists(st.tuples(PHASE, PHASE, PHASE, st.integers(0, 10 ** 4)), min_size=1, max_size=5)
RUN_KINDS = st.sampled_from(["DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA",
                             "HYBRID_TRANSFORMER model_parallel_NPU_group: 2", "HYBRID_DLRM 0"])


def _text(kind, lays):
    rows = [" ".join([f"l{i}", "-1"] + [str(x) for ph in (f, g, w) for x in ph] + [str(u)])
            for i, (f, g, w, u) in enumerate(lays)]
    return trace_text(kind, rows)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RUN_KINDS, LAYERS, st.sampled_from(["mesh", "fred-b", "fred-d"]))
def test_valid_traces_round_trip_and_run(kind, lays, fabric):
    t = parse_trace(_text(kind, lays), name="gen.txt")
    assert [(l.fwd_cycles, l.fwd_comm, l.fwd_bytes) for l in t.layers] == [f for f, _, _, _ in lays]
    assert [l.update_cycles for l in t.layers] == [u for _, _, _, u in lays]
    e = estimate_trace(None, fabric, trace=t)
    assert math.isclose(e.compute_time + e.exposed_comm, e.iteration_time, rel_tol=1e-9, abs_tol=1e-15)
    assert e.iteration_time >= e.compute_time * (1 - 1e-12) and e.compute_time >= 0
    assert e.iteration_time >= e.compute_busy * (1 - 1e-12)
    data_loop = t.kind in ("DATA", "HYBRID_DLRM")
    assert math.isclose(e.compute_busy, (t.total_cycles() - (t.layers[0].ig_cycles if data_loop else 0)) / 1e9,
                        rel_tol=1e-12, abs_tol=1e-18)


def test_fields_table_matches_format():
    assert len(FIELDS) == 12 and FIELDS[0] == "name" and FIELDS[-1] == "update delay cycles"


# ---- the command line ----------------------------------------------------------------------------

def _fred(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "fred", *args], capture_output=True, text=True, timeout=300)


def test_cli_trace_table_and_json(tmp_path):
    import json
    p = tmp_path / "tiny.txt"
    p.write_text("\n".join(layer(i, f=50000, ig=50000, wg=50000, wgc="ALLREDUCE", wgb=1 << 22, fc="ALLREDUCE",
                                 fb=1 << 20, igc="ALLREDUCE", igb=1 << 20) for i in range(3)) + "\n")
    hdr = "HYBRID_TRANSFORMER model_parallel_NPU_group: 2"
    r = _fred("estimate", "--trace", str(p), "--trace-header", hdr, "-f", "mesh,fred-d")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("switch timing:")
    assert out[1].startswith(f"trace: {p} -- {hdr} (header given), 3 layers, compute clock 1 GHz")
    rows = [ln.split() for ln in out if ln.startswith("tiny ")]
    assert [r_[1] for r_ in rows] == ["Mesh", "Fred-D"] and {r_[2] for r_ in rows} == {"MP(2)-DP(10)-PP(1)"}
    r = _fred("estimate", "--trace", str(p), "--trace-header", hdr, "-f", "fred-b", "--trace-clock-ghz", "2", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["kind"] == "fred-estimate-trace" and d["schema_version"] == 2
    assert d["trace_clock_GHz"] == 2 and d["switch_timing_source"]
    assert d["traces"] == [{"path": str(p), "kind": "HYBRID_TRANSFORMER", "header": hdr, "header_source": "given",
                            "layers": 3, "strategy": "MP(2)-DP(10)-PP(1)", "placement": "MP inner (NPU = mp + a*dp)"}]
    (row,) = d["results"]
    assert row["fabric"] == "fred-b" and row["trace"] == str(p) and row["speedup"] > 0
    assert row["compute_time_s"] == pytest.approx(3 * 150000 / 2e9)      # busy compute, as for built-in workloads
    assert "compute_busy_s" not in row
    # rounded to 6 significant digits (fred.commands.jsonout)
    assert row["iteration_time_s"] == pytest.approx(row["critical_path_compute_s"] + row["exposed_comm_s"], rel=1e-5)


@pytest.mark.parametrize("args, msg", [
    (["--trace", "NOFILE.txt"], "trace file 'NOFILE.txt' does not exist"),
    (["--trace-header", "DATA"], "--trace-header 'DATA' needs --trace FILE"),
    (["--trace", "{tiny}", "--trace-header", "DATA", "--workload", "resnet-152"], "--workload 'resnet-152' does not apply to --trace"),
    (["--trace", "{tiny}", "--trace-header", "DATA", "--tflops", "5"], "--tflops 5 does not apply to --trace"),
    (["--trace", "{tiny}", "--trace-header", "DATA", "-s", "MP(4)-DP(5)"], "must be MP(1)-DP(20)-PP(1), not MP(4)-DP(5)-PP(1)"),
    (["--trace", "{tiny}", "--trace-header", "DATA", "--trace-clock-ghz", "0"], "--trace-clock-ghz 0 is too small: must be >= 0.001"),
    (["--trace", "{tiny}"], "line 1, field kind: no header"),
    (["--trace", "{tiny}", "--trace-header", "PIPELINE 4"], "header given by the caller: line 1, field kind: unknown"),
])
def test_cli_trace_bad_input_one_line(tmp_path, args, msg):
    p = tmp_path / "tiny.txt"
    p.write_text(layer() + "\n")
    r = _fred("estimate", *[a.replace("{tiny}", str(p)) for a in args])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fred: error:") and msg in lines[0], r.stderr


def test_all_to_all_method_with_traces(tmp_path, capsys):
    """``--all-to-all-method`` with ``--trace``: refused without a FRED fabric or without an
    ALLTOALL layer in the traces (the option would change nothing: the fuzz set found it ignored);
    with both, online routing of the trace's all-to-all is slower than the precompiled phases."""
    from fred.cli import main

    plain = tmp_path / "mp.txt"
    plain.write_text("MODEL\n1\nl0\t-1\t1000\tALLGATHER\t65536\t1000\tALLREDUCE\t65536\t1000\tNONE\t0\t100\n")
    a2a = tmp_path / "moe.txt"
    a2a.write_text("MODEL\n1\nl0\t-1\t1000\tALLTOALL\t67108864\t1000\tALLTOALL\t67108864\t1000\tNONE\t0\t100\n")
    assert main(["estimate", "--trace", str(a2a), "-f", "mesh", "--all-to-all-method", "online"]) == 2
    assert "only applies with a FRED fabric" in capsys.readouterr().err
    assert main(["estimate", "--trace", str(plain), "-f", "fred-d", "--all-to-all-method", "online"]) == 2
    assert "only applies to a trace with an ALLTOALL layer" in capsys.readouterr().err
    times = {}
    for method in ("precompiled", "online"):
        assert main(["estimate", "--trace", str(a2a), "-f", "fred-d", "--all-to-all-method", method,
                     "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        (r,) = [r for r in doc["results"] if r["fabric"] == "fred-d"]
        times[method] = r["iteration_time_s"]
    assert times["online"] > times["precompiled"], times
