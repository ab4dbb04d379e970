"""Property tests of every parser of user text (issue 12): flows, port sets, NPU groups,
strategies, sizes, ASTRA-sim YAML networks and timing files. Any text in gives either a valid
object or a one-line ``ValueError``/``FredError`` naming the input, never another exception
(no IndexError, KeyError, TypeError, RecursionError, OverflowError ...)."""

from __future__ import annotations

import copy
import json
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fred import FredError
from fred.commands.options import MAX_BYTES, parse_size
from fred.contract.timing import TimingFileError, default_timing_path, load_timing, validate_timing
from fred.hdl.netlist.flows import Flow, parse_flow, parse_ports, validate_flows
from fred.model.network.from_yaml import MAX_NPUS, NetworkSpec, parse_network_yaml
from fred.model.collectives.strategy import parse_group, parse_strategy

OK_ERRORS = (ValueError, FredError)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _one_line(exc):
    msg = str(exc)
    assert msg.strip() and "\n" not in msg.strip(), repr(msg)


def _call(fn, *args):
    try:
        return fn(*args)
    except OK_ERRORS as exc:
        _one_line(exc)
        return None


# text that looks like the syntax (digits, ranges, separators) as well as anything at all
PORTISH = st.from_regex(r"\A[0-9 ,\-]{0,30}\Z")
FLOWISH = st.from_regex(r"\A[0-9 ,\->]{0,30}\Z")
ANY = st.text(max_size=60)


@SETTINGS
@given(st.one_of(FLOWISH, ANY))
def test_parse_flow(text):
    f = _call(parse_flow, text)
    if f is not None:
        assert isinstance(f, Flow) and f.inputs and f.outputs
        assert parse_flow(str(f)) == f  # the written form reads back
        _call(validate_flows, [text], 16)


@SETTINGS
@given(st.one_of(PORTISH, ANY))
def test_parse_ports(text):
    ports = _call(parse_ports, text)
    if ports is not None:
        assert ports and all(isinstance(p, int) and 0 <= p < 1024 for p in ports)


@SETTINGS
@given(st.one_of(PORTISH, ANY, st.just("all")), st.integers(1, 64))
def test_parse_group(text, npus):
    g = _call(parse_group, text, npus)
    if g is not None:
        assert len(set(g)) == len(g) and all(0 <= i < npus for i in g)


STRATEGYISH = st.from_regex(r"\A((MP|DP|PP|mp|xx)\([0-9]{0,3}\)[-_x*, ]?){0,4}\Z")


@SETTINGS
@given(st.one_of(STRATEGYISH, ANY), st.sampled_from([None, 20, 16]))
def test_parse_strategy(text, npus):
    abc = _call(parse_strategy, text, npus)
    if abc is not None:
        assert len(abc) == 3 and all(isinstance(v, int) and v >= 1 for v in abc)
        if npus is not None:
            assert math.prod(abc) == npus


SIZEISH = st.from_regex(r"\A[ ]?[0-9.eE+\-]{0,12}[ ]?(|b|B|k|KB|KiB|MiB|GiB|TiB|G|T|PiB|xb)[ ]?\Z")


@SETTINGS
@given(st.one_of(SIZEISH, ANY))
def test_parse_size(text):
    n = _call(parse_size, text)
    if n is not None:
        assert isinstance(n, int) and 1 <= n <= MAX_BYTES


@SETTINGS
@given(st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True)))
def test_parse_size_numbers(value):
    n = _call(parse_size, value)
    if n is not None:
        assert n == value and 1 <= n <= MAX_BYTES


# ---- YAML networks ------------------------------------------------------------------------------
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**10), st.floats(allow_nan=True),
                    st.text(max_size=8), st.sampled_from(["Ring", "Switch", "FullyConnected", "1e3", ".inf"]))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4), st.dictionaries(st.text(max_size=4), SCALARS, max_size=2))
KEYS = st.sampled_from(["topology", "npus_count", "bandwidth", "latency", "gb_bytes", "links"])


@SETTINGS
@given(st.dictionaries(KEYS, VALUES, max_size=6))
def test_network_yaml_documents(doc):
    spec = _call(parse_network_yaml, yaml.safe_dump(doc))
    if spec is not None:
        assert isinstance(spec, NetworkSpec) and 2 <= spec.npus <= MAX_NPUS


@SETTINGS
@given(ANY)
def test_network_yaml_any_text(text):
    _call(parse_network_yaml, text)


@SETTINGS
@given(st.lists(st.integers(1, 70), min_size=1, max_size=3),
       st.lists(st.sampled_from(["1e3", "1.0e3", "100", "2.5E+2", "-1", "0", "1e999"]), min_size=1, max_size=3))
def test_network_yaml_numbers(counts, bws):
    n = len(counts)
    bws = (bws * n)[:n]
    text = (f"topology: [ {', '.join(['Ring'] * n)} ]\nnpus_count: [ {', '.join(map(str, counts))} ]\n"
            f"bandwidth: [ {', '.join(bws)} ]\nlatency: [ {', '.join(['5e2'] * n)} ]\n")
    spec = _call(parse_network_yaml, text)
    if spec is not None:  # written 1e3 / 1.0e3 / 2.5E+2 are numbers (ASTRA-sim files), not strings
        assert all(isinstance(b, float) and b > 0 for b in spec.bandwidth)
        assert spec.latency == [500.0] * n


# ---- timing files -------------------------------------------------------------------------------
DEFAULT = json.loads(default_timing_path().read_text())
JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                        st.text(max_size=5), st.lists(st.integers(), max_size=2), st.just({}))


def _paths(doc, prefix=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))


PATHS = list(_paths(DEFAULT))


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(JSON_VALUES, st.just("<delete>"))), min_size=1,
                max_size=3))
def test_timing_document_mutations(changes):
    doc = copy.deepcopy(DEFAULT)
    for path, value in changes:
        node = doc
        for k in path[:-1]:
            if not isinstance(node, dict) or k not in node:
                break
            node = node[k]
        else:
            if isinstance(node, dict):
                if value == "<delete>":
                    node.pop(path[-1], None)
                else:
                    node[path[-1]] = value
    try:
        out = validate_timing(doc, "mutated.json")
    except TimingFileError as exc:
        _one_line(exc)
        assert "mutated.json" in str(exc)  # names the file
        return
    assert out is doc


@SETTINGS
@given(st.one_of(ANY, st.binary(max_size=40).map(lambda b: b.decode("latin-1"))))
def test_timing_file_any_text(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("t") / "t.json"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    with pytest.raises(TimingFileError) as info:
        load_timing(path)
    _one_line(info.value)
    assert str(path) in str(info.value)


def test_the_default_is_valid():
    assert load_timing().summary["switch_latency_cycles"] > 0


# ---- ASTRA-sim text traces, Chakra traces, workload files (mutations of the real examples) ---------
import os  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_fuzz_files import mutate_bytes, mutate_et, mutate_text  # noqa: E402
from cli_fuzz_cases import HERE, SHARED  # noqa: E402

from fred.model.inputs.astra_trace import parse_trace  # noqa: E402
from fred.model.inputs.chakra_et import load_chakra  # noqa: E402
from fred.model.workload.loader import workload_from_dict  # noqa: E402

#: a trace of the format when shared/ is not there (and beside the real ones when it is)
_OWN_TRACE = ("HYBRID_TRANSFORMER model_parallel_NPU_group: 4\n3\n"
              + "".join(f"l{i} -1 {1000 + i} ALLGATHER 4096 900 ALLREDUCE 8192 800 NONE 0 10\n" for i in range(3)))
TRACES = [_OWN_TRACE] + [open(os.path.join(SHARED, "workloads", "astra-sim", f), encoding="utf-8").read()
                         for f in sorted(os.listdir(os.path.join(SHARED, "workloads", "astra-sim")))
                         if f.endswith(".txt")] if os.path.isdir(os.path.join(SHARED, "workloads")) else [_OWN_TRACE]
HEADER = "HYBRID_TRANSFORMER model_parallel_NPU_group: 4"


@SETTINGS
@given(st.sampled_from(range(len(TRACES))), st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_trace_mutations(which, seed, n):
    rng = random.Random(seed)
    text = TRACES[which]
    for _ in range(n):
        text, _ = mutate_text(text, rng)
    header = HEADER if text.split(None, 1)[:1] not in (["DATA"], ["MODEL"]) and "HYBRID" not in text[:40] else None
    try:
        t = parse_trace(text, name="mutated.txt", header=header)
    except FredError as exc:
        _one_line(exc)
        assert str(exc).startswith("mutated.txt"), str(exc)
        return
    assert t.layers and all(l.fwd_cycles >= 0 and l.fwd_bytes >= 0 for l in t.layers)


CHAKRA = os.path.join(HERE, "data", "chakra-et", "all_reduce_4npus_1MB")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_chakra_mutations(tmp_path_factory, seed, fields, everywhere):
    rng = random.Random(seed)
    d = tmp_path_factory.mktemp("et")
    files = sorted(os.listdir(CHAKRA))
    for f in files:
        shutil.copy(os.path.join(CHAKRA, f), d / f)
    victim = d / rng.choice(files)
    data, _ = (mutate_et if fields else mutate_bytes)(victim.read_bytes(), rng)
    for f in (files if everywhere and fields else [victim.name]):
        (d / f).write_bytes(data)
    try:
        trace = load_chakra(d)
    except ValueError as exc:
        _one_line(exc)
        assert str(d) in str(exc) or any(f in str(exc) for f in files), str(exc)
        return
    assert trace.npus == 4 and all(op.size > 0 for op in trace.ops if op.kind == "collective")


WORKLOAD = {"name": "w", "kind": "transformer", "layers": 2, "hidden": 64, "heads": 4, "seq": 16, "vocab": 100}
WORKLOAD_KEYS = st.sampled_from(sorted(WORKLOAD) + ["ffn_mult", "dtype_bytes", "microbatches", "samples_per_replica",
                                                    "input_bytes_per_sample", "strategy", "mode", "sweep_microbatches",
                                                    "published_params", "layer_list", "stages"])
NASTY_NUMBERS = st.sampled_from([float("nan"), float("inf"), -float("inf"), 2**70, -1, 0, 0.5, 1e300, 1e-300, "8",
                                  True, None, 3000, 1e6])
WORKLOAD_VALUES = st.one_of(NASTY_NUMBERS, NASTY_NUMBERS, SCALARS, st.lists(SCALARS, max_size=3),
                            st.dictionaries(st.integers(-2, 40), SCALARS, max_size=2), st.sampled_from(["resnet", "layers"]))


@SETTINGS
@given(st.dictionaries(WORKLOAD_KEYS, WORKLOAD_VALUES, max_size=4))
def test_workload_fields(changes):
    """Any field given any value: a workload whose figures are finite, or one FredError line
    naming the file."""
    raw = {**WORKLOAD, **changes}
    try:
        w = workload_from_dict(raw, "mutated.yml")
    except FredError as exc:
        _one_line(exc)
        assert "mutated.yml" in str(exc), str(exc)
        return
    assert w.layers and all(math.isfinite(l.fwd_flops) and l.fwd_flops >= 0 for l in w.layers)
    assert 1 <= w.microbatches <= 1024 and math.isfinite(w.samples_per_replica)


@pytest.mark.parametrize("key", ["layers", "hidden", "heads", "seq", "vocab", "ffn_mult", "dtype_bytes", "microbatches",
                                 "samples_per_replica", "input_bytes_per_sample", "published_params"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 2**70, -1, 0, "8", True, [], 1e300])
def test_workload_each_field(key, value):
    """Every number field of a workload file, every nasty value: refused naming the field, or a
    workload whose numbers are all finite."""
    try:
        w = workload_from_dict({**WORKLOAD, key: value}, "w.yml")
    except FredError as exc:
        _one_line(exc)
        assert f"'{key}'" in str(exc) and "w.yml" in str(exc), str(exc)
        return
    nums = [w.input_bytes_per_sample, w.samples_per_replica, w.published_params or 0.0]
    nums += [v for l in w.layers for v in (l.fwd_flops, l.bwd_flops, l.params, l.act_bytes, l.fwd_mem_bytes)]
    assert all(math.isfinite(v) for v in nums), (key, value)
