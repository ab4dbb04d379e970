"""Several hundred bad command lines, every subcommand (issue 12): each one gives exit status 2
and exactly one line ``fred: error: ...`` naming the option and the value, with nothing on
standard output, no traceback, no output file left behind, and no hang (every case runs under
a watchdog; none may start the slow work a good command line would).

Cases run in process through :func:`fred.cli.main` (fast); a sample runs as ``python -m fred``
subprocesses to prove no traceback reaches stderr. ``{d}`` in a command line is the folder of
the bad input files written by :func:`files`. Add a case for every new option or failure kind.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

from fred.cli import main
from fred.sim.formal import descendants

#: seconds a bad command line may take (imports included): refusing must not start any work
WATCHDOG_S = 30

TIMING = None  # the embedded default timing document, loaded by files()


# ---- the bad input files ------------------------------------------------------------------------
YAMLS = {
    "one.yml": "topology: [ Ring ]\nnpus_count: [ 1 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n",
    "huge.yml": "topology: [ Ring ]\nnpus_count: [ 1000000000 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n",
    "big4.yml": "topology: [ Ring, Ring, Ring, Ring ]\nnpus_count: [ 64, 64, 64, 64 ]\n"
                "bandwidth: [ 1, 1, 1, 1 ]\nlatency: [ 1, 1, 1, 1 ]\n",
    "ring4096.yml": "topology: [ Ring ]\nnpus_count: [ 4096 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n",
    "torus.yml": "topology: [ Ring, Ring ]\nnpus_count: [ 8, 8 ]\nbandwidth: [ 1e3, 1.0e3 ]\nlatency: [ 5e2, 500 ]\n",
    "bw_huge.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 1e300 ]\nlatency: [ 500 ]\n",
    "lat_huge.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100 ]\nlatency: [ 1e300 ]\n",
    "bw_zero.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 0 ]\nlatency: [ 500 ]\n",
    "lat_neg.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100 ]\nlatency: [ -1 ]\n",
    "bw_str.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ fast ]\nlatency: [ 500 ]\n",
    "bw_nan.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ .nan ]\nlatency: [ 500 ]\n",
    "bw_inf.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ .inf ]\nlatency: [ 500 ]\n",
    "npus_frac.yml": "topology: [ Ring ]\nnpus_count: [ 8.5 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n",
    "npus_str.yml": "topology: [ Ring ]\nnpus_count: [ eight ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n",
    "npus_bool.yml": "topology: [ Ring ]\nnpus_count: [ true ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n",
    "npus_null.yml": "topology: [ Ring ]\nnpus_count: [ ~ ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n",
    "kind.yml": "topology: [ Torus ]\nnpus_count: [ 8 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n",
    "lengths.yml": "topology: [ Ring ]\nnpus_count: [ 8, 8 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n",
    "empty_dims.yml": "topology: []\nnpus_count: []\nbandwidth: []\nlatency: []\n",
    "missing.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100 ]\n",
    "unknown.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\nlinks: 3\n",
    "gb_tiny.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\ngb_bytes: 1e-300\n",
    "gb_str.yml": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\ngb_bytes: lots\n",
    "list.yml": "- topology\n- npus_count\n",
    "scalar.yml": "42\n",
    "blank.yml": "",
    "broken.yml": "topology: [ Ring\n",
    "tab.yml": "topology:\n\t- Ring\n",
}


def _timing_variants():
    """name -> function changing a copy of the default timing document."""
    def setter(section, key, value):
        return lambda d: d[section].__setitem__(key, value)
    return {
        "t_lat_huge.json": setter("summary", "switch_latency_cycles", 1e300),
        "t_lat_null.json": setter("summary", "switch_latency_cycles", None),
        "t_lat_str.json": setter("summary", "switch_latency_cycles", "30"),
        "t_lat_zero.json": setter("summary", "switch_latency_cycles", 0),
        "t_lat_neg.json": setter("summary", "switch_latency_cycles", -30),
        "t_lat_bool.json": setter("summary", "switch_latency_cycles", True),
        "t_bpc_big.json": setter("summary", "beats_per_cycle_per_port", 2.0),
        "t_bpc_zero.json": setter("summary", "beats_per_cycle_per_port", 0),
        "t_phase_str.json": setter("summary", "phase_switch_cycles", "7"),
        "t_phase_huge.json": setter("summary", "phase_switch_cycles", 1e300),
        "t_phase_neg.json": setter("summary", "phase_switch_cycles", -1),
        "t_pre_neg.json": setter("summary", "preemption_cycles_max", -5),
        "t_pre_list.json": setter("summary", "preemption_cycles_max", [35]),
        "t_act_big.json": setter("summary", "activation_cycles", 100),
        "t_fab_lat.json": setter("summary", "fabric_latency_cycles", 500),
        "t_overhead_str.json": setter("summary", "switch_overhead_cycles", "9"),
        "t_chiplets.json": setter("summary", "chiplets", "FRED_3(12)"),
        "t_no_summary.json": lambda d: d.pop("summary"),
        "t_summary_list.json": lambda d: d.__setitem__("summary", []),
        "t_version.json": lambda d: d.__setitem__("schema_version", 9),
        "t_kind.json": lambda d: d.__setitem__("kind", "something-else"),
        "t_lanes_zero.json": setter("rtl", "lanes", 0),
        "t_dtype_num.json": setter("rtl", "dtype", 16),
        "t_no_source.json": lambda d: d.pop("source"),
        "t_seed_str.json": lambda d: d.__setitem__("seed", "1"),
        "t_fab_kind_huge.json": lambda d: next(iter(d["fabrics"].values()))["latency_cycles"].__setitem__(
            "reduce", 1e300),
        "t_fab_bpc_big.json": lambda d: next(iter(d["fabrics"].values()))["beats_per_cycle_per_port"].__setitem__(
            "unicast", 7.0),
        # the measured goodput curve: a share of the fault-free rate, never rising with the fault rate
        "t_lf_above_one.json": lambda d: d["link_faults"]["points"][1].__setitem__("goodput", 1.5),
        "t_lf_rising.json": lambda d: d["link_faults"]["points"][2].__setitem__(
            "goodput", d["link_faults"]["points"][1]["goodput"] + 0.1),
    }


TEXT_FILES = {
    "t_corrupt.json": '{"kind": "fred-timing", ',
    "t_list.json": "[1, 2, 3]",
    "t_empty.json": "",
    "t_nan.json": None,        # filled in from the default below
    "t_deep.json": "[" * 100_000,
    "w_list.yml": "- a\n- b\n",
    "w_missing.yml": "name: mine\nkind: transformer\n",
    "w_kind.yml": "name: mine\nkind: lstm\n",
    "w_heads.yml": "name: mine\nkind: transformer\nlayers: 2\nhidden: 10\nheads: 3\nseq: 8\nvocab: 100\n",
    "w_neg.yml": "name: mine\nkind: transformer\nlayers: -2\nhidden: 12\nheads: 3\nseq: 8\nvocab: 100\n",
    "w_broken.yml": "name: [\n",
    "notes.txt": "a regular file\n",
    # found by the fuzz harness (tests/cli/cli_fuzz.py): each field checked with its type and range
    "w_inf.yml": "name: mine\nkind: transformer\nlayers: .inf\nhidden: 12\nheads: 3\nseq: 8\nvocab: 100\n",
    "w_many.yml": "name: mine\nkind: transformer\nlayers: 1e9\nhidden: 12\nheads: 3\nseq: 8\nvocab: 100\n",
    "w_text.yml": "name: mine\nkind: transformer\nlayers: '8'\nhidden: 12\nheads: 3\nseq: 8\nvocab: 100\n",
    "w_ffn.yml": "name: mine\nkind: transformer\nlayers: 2\nhidden: 12\nheads: 3\nseq: 8\nvocab: 100\nffn_mult: .nan\n",
    "w_mb.yml": "name: mine\nkind: transformer\nlayers: 2\nhidden: 12\nheads: 3\nseq: 8\nvocab: 100\n"
                "microbatches: 32\nsamples_per_replica: 16\n",
    "w_strategy.yml": "name: mine\nkind: transformer\nlayers: 2\nhidden: 12\nheads: 3\nseq: 8\nvocab: 100\n"
                      "strategy: 1180591620717411303424\n",
    "w_blocks.yml": "name: mine\nkind: resnet\nimage: [3, 32, 32]\nclasses: 10\nstem: {channels: 8, kernel: 3, "
                    "stride: 1, pool_kernel: 3, pool_stride: 2}\nstages: [{blocks: 1000000, width: 8, stride: 1}]\n",
    "w_layers.yml": "name: mine\nkind: layers\nlayer_list: [1]\n",
    "w_ok.yml": "name: mine\nkind: transformer\nlayers: 2\nhidden: 64\nheads: 4\nseq: 16\nvocab: 100\n"
                "published_params: 2.0e5\n",
    "bw_tiny.yml": "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 1e-300 ]\nlatency: [ 500 ]\n",
    "cycles.txt": "MODEL\n1\nl -1 9223372036854775807 NONE 0 1 NONE 0 1 NONE 0 1\n",
    "bytes.txt": "DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 2251799813685248 1\n",
}


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """The folder holding every bad input file."""
    from fred.contract.timing import default_timing_path

    root = tmp_path_factory.mktemp("bad")
    for name, text in YAMLS.items():
        (root / name).write_text(text)
    base = json.loads(default_timing_path().read_text())
    for name, change in _timing_variants().items():
        doc = json.loads(json.dumps(base))
        change(doc)
        (root / name).write_text(json.dumps(doc))
    for name, text in TEXT_FILES.items():
        if text is None:
            text = json.dumps(base).replace('"switch_latency_cycles": 30', '"switch_latency_cycles": NaN')
        (root / name).write_text(text)
    (root / "binary.bin").write_bytes(b"\xff\xfe\x00\x81 not text")
    (root / "folder.yml").mkdir()
    os.mkfifo(root / "fifo.yml")  # reading it would block forever
    (root / "ring4.yml").write_text(YAMLS["torus.yml"].replace("[ Ring, Ring ]", "[ Ring ]")
                                    .replace("[ 8, 8 ]", "[ 4 ]").replace("[ 1e3, 1.0e3 ]", "[ 50 ]")
                                    .replace("[ 5e2, 500 ]", "[ 500 ]"))
    (root / "big.yml").write_text("# padding\n" * 200_000)  # 2 MB: more than a network file may have
    _chakra_variants(root)
    return root


def _chakra_variants(root):
    """Chakra trace folders, each with one fault: a file with one operation more, a collective of
    more than 1 PiB."""
    import shutil

    from cli_fuzz_files import _et_messages, _et_pack

    from fred.model.inputs import Node

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "chakra-et", "all_reduce_4npus_1MB")
    for name in ("et_longer", "et_huge"):
        shutil.copytree(src, root / name)
    extra = Node(id=999, name="late", type=4, duration_micros=5).SerializeToString()
    with open(root / "et_longer" / "all_reduce.2.et", "ab") as fh:
        fh.write(bytes([len(extra)]) + extra)
    for f in os.listdir(root / "et_huge"):
        meta, *nodes = _et_messages((root / "et_huge" / f).read_bytes())
        out = [meta]
        for raw in nodes:
            node = Node()
            node.ParseFromString(raw)
            for at in node.attr:
                if at.name == "comm_size":
                    at.uint64_val = 2**63
            out.append(node.SerializeToString())
        (root / "et_huge" / f).write_bytes(_et_pack(out))


# ---- generated cases: every bounded number option, out of range and not a number ------------------
#: (command line before the option, option, least, most) of every integer option
INT_OPTIONS = [
    ("verilog r", "--lanes", 1, 1024), ("verilog r", "--middle", 2, 64),
    ("verilog d", "--lanes", 1, 1024), ("verilog d", "--middle", 2, 64),
    ("verilog rd", "--lanes", 1, 1024),
    ("verilog fabric --ports 12", "--lanes", 1, 1024), ("verilog fabric --ports 12", "--middle", 2, 64),
    ("verilog fabric", "--ports", 2, 64),
    ("verilog switch --ports 4", "--data-depth", 2, 4096), ("verilog switch --ports 4", "--ctrl-depth", 1, 4096),
    ("verilog switch --ports 4", "--max-len", 1, 255), ("verilog switch --ports 4", "--table-entries", 1, 255),
    ("verilog switch --ports 4", "--table-bytes", 1, 2**20), ("verilog switch", "--ports", 2, 64),
    ("verilog switch --ports 4", "--lanes", 1, 1024), ("verilog switch --ports 4", "--middle", 2, 64),
    ("verilog crossbar", "--ports", 2, 64), ("verilog crossbar --ports 4", "--lanes", 1, 1024),
    ("route --flow 0>1", "--ports", 2, 1024), ("route --ports 8 --flow 0>1", "--middle", 2, 64),
    ("route --ports 8 --collective reduce --group 0-3", "--root", 0, 1023),
    ("route --study", "--samples", 0, 1000), ("route --study", "--seed", 0, 2**32 - 1),
    ("sim cell r", "--middle", 2, 64), ("sim cell rd", "--lanes", 1, 256), ("sim cell d", "--beats", 1, 200_000),
    ("sim cell r", "--seed", 0, 2**32 - 1),
    ("sim faults", "--ports", 4, 16), ("sim faults", "--packets", 1, 4096), ("sim faults", "--seed", 0, 2**32 - 1),
    ("characterize", "--middle", 2, 64), ("characterize", "--lanes", 1, 64),
    ("characterize", "--seed", 0, 2**32 - 1), ("characterize", "--beats", 2, 100_000),
    ("characterize", "--sweep-beats", 2, 100_000), ("characterize", "--cell-beats", 0, 100_000),
    ("characterize", "--switch-ports", 4, 16), ("characterize", "--switch-packet-flits", 1, 255),
    ("characterize", "--chiplets", 2, 64),
    ("timing", "--lanes", 1, 16), ("timing", "--fabric-ports", 0, 16),
    ("timing", "--fpga-fabric-lanes", 1, 4), ("timing", "--seed", 0, 2**31 - 1),
    ("collective", "--chunks", 1, 1024), ("collective --op reduce", "--root", 0, None),
    ("estimate", "--microbatches", 1, 1024), ("estimate", "--samples", 1, 1_000_000),
    ("estimate", "--granularity", 1, 256), ("estimate", "--stream-steps", 1, 256),
    ("sweep", "--granularity", 1, 256), ("sweep", "--stream-steps", 1, 256),
    ("compare", "--middle", 2, 64), ("compare", "--lanes", 1, 64), ("compare", "--sim-lanes", 1, 64),
    ("compare", "--beats", 4, 10_000), ("compare", "--seed", 0, 2**32 - 1), ("compare", "--ports", 2, 64),
    ("scan", "--points", 1, 100), ("scan", "--samples", 1, 1_000_000), ("scan", "--microbatches", 1, 1024),
    ("scan", "--granularity", 1, 256), ("sweep", "--workers", 0, 64), ("scan", "--workers", 0, 64),
    ("estimate", "--wafers", 1, 256), ("sweep", "--wafers", 1, 256), ("scan", "--wafers", 1, 256),
    ("infer", "--batch", 1, 65_536), ("infer", "--prompt-tokens", 1, 2**20), ("infer", "--output-tokens", 2, 2**20),
]

#: (command line before the option, option, least, most, least excluded) of every real-number option
NUMBER_OPTIONS = [
    (cmd, opt, low, high, False)
    for cmd in ("estimate", "sweep", "scan")
    for opt, low, high in (("--tflops", 1e-3, 1e7), ("--hbm-bw", 1e-3, 1e3), ("--hbm-gb", 1e-3, 1e6),
                           ("--npu-bw", 1e-3, 1e3), ("--mesh-link-bw", 1e-3, 1e6), ("--io-bw", 1e-3, 1e6),
                           ("--link-latency-ns", 0, 1e9), ("--switch-cycles", 0, 1e6),
                           ("--switch-ghz", 1e-3, 1e3), ("--bit-error-rate", 0, 1e-3))
] + [("sim faults", "--rate", 0, 0.05, False), ("collective", "--bit-error-rate", 0, 1e-3, False),
     ("estimate", "--utilisation", 1e-3, 1, False), ("sweep", "--utilisation", 1e-3, 1, False),
     ("collective --network {d}/torus.yml", "--gb-bytes", 1, 2**40, False),
     ("scan", "--k-min", 1e-3, 1e4, False), ("scan", "--k-max", 1e-3, 1e4, False),
     ("estimate --trace x.txt", "--trace-clock-ghz", 1e-3, 1e3, False)]


#: options taking a comma list (an empty one "names nothing": _name_cases)
LIST_OPTIONS = {("characterize", "--chiplets"), ("compare", "--ports"), ("scan", "--samples")}
# (sim faults --faults / --phases are lists of names: _name_cases)


def _int_cases():
    out = []
    for cmd, opt, low, high in INT_OPTIONS:
        out.append((f"{cmd} {opt}={low - 1}", f"{opt} {low - 1} is too small: must be >= {low}"))
        if high is not None:
            out.append((f"{cmd} {opt} {high + 1}", f"{opt} {high + 1} is too large: must be <= {high}"))
            out.append((f"{cmd} {opt} {10**30}", f"{opt} {10**30} is too large"))
        for text in ("2.5", "1e3", "x", "0x") + (() if (cmd, opt) in LIST_OPTIONS else ("''",)):
            shown = "''" if text == "''" else repr(text)
            out.append((f"{cmd} {opt} {text}", f"{opt} {shown} is not a whole number"))
    return out


def _number_cases():
    out = []
    for cmd, opt, low, high, low_open in NUMBER_OPTIONS:
        for text in ("nan", "inf", "-inf"):
            out.append((f"{cmd} {opt}={text}", f"{opt} {text} must be a finite number"))
        # a refusal names the value as typed ('2', not '2.0'; '1e+08', not '100000000.0')
        out.append((f"{cmd} {opt} {high * 10:g}", f"{opt} {high * 10:g} is too large"))
        below = low if low_open else (low / 10 if low else -1)
        out.append((f"{cmd} {opt}={below:g}", f"{opt} {below:g} is too small"))
        out.append((f"{cmd} {opt} fast", f"{opt} 'fast' is not a number"))
        out.append((f"{cmd} {opt} ''", f"{opt} '' is not a number"))
    return out


def _negative_cases():
    """A negative value after a space (``--tflops -5``) reaches its option, which names it (argparse
    alone takes '-5...' for an unknown option: 'expected one argument')."""
    out = []
    for cmd, opt, low, high, low_open in NUMBER_OPTIONS:
        out.append((f"{cmd} {opt} -5", f"{opt} -5 is too small"))
    for cmd, opt, low, high in INT_OPTIONS:
        if low > -5:
            out.append((f"{cmd} {opt} -5", f"{opt} -5 is too small"))
    return out + [("collective --size -1GiB", "--size '-1GiB' is not a size"),
                  ("collective --size -.5", "--size '-.5'"),
                  ("route --ports 8 --flow -1>0", "inputs '-1': '-1' is not a port number")]


def _name_cases():
    """Every text option given an empty string."""
    opts = [("verilog fabric --ports 12", "--name"), ("verilog r", "--dtype"), ("sim cell r", "--dtype"),
            ("characterize", "--dtype"), ("compare", "--dtype"),
            ("route --ports 8", "--collective"), ("collective", "--network"), ("collective", "--op"),
            ("collective", "--group"), ("collective", "--strategy"), ("collective", "--algorithm"),
            ("collective", "--timing"), ("timing", "--timing"), ("estimate", "--strategy"), ("estimate", "--timing"),
            ("sweep", "--timing"), ("sweep", "--workload"), ("estimate", "--npu"), ("estimate", "--memory"),
            ("estimate", "--trace"), ("estimate", "--trace-header"), ("sweep", "--scheduler"), ("scan", "--npu"),
            ("estimate --wafers 2", "--off-wafer"),
            ("infer", "--strategy"), ("infer", "--timing"), ("infer", "--npu"), ("infer", "--all-to-all-method")]
    out = [(f"{cmd} {opt} ''", f"{opt} '' must not be empty") for cmd, opt in opts]
    out += [(f"{cmd} {opt} '  '", f"{opt} '  ' must not be empty") for cmd, opt in opts[:4]]
    lists = [("collective", "--fabric"), ("estimate", "--fabric"), ("estimate", "--workload"),
             ("sweep", "--fabric"), ("characterize", "--chiplets"), ("compare", "--ports"),
             ("timing", "--dtypes"), ("scan", "--workload"), ("scan", "--fabric"), ("scan", "--samples"),
             ("sim faults", "--faults"), ("sim faults", "--phases"), ("infer", "--workload"), ("infer", "--fabric")]
    out += [(f"{cmd} {opt} ''", f"{opt} '' names nothing") for cmd, opt in lists]
    out += [(f"{cmd} {opt} ,", f"{opt} ',' names nothing") for cmd, opt in lists]
    return out


# ---- hand-written cases: meaning, files, rules across options ------------------------------------
CASES = [
    # no command / unknown words
    ("nope", "invalid choice: 'nope'"),
    ("--nope", "unrecognized arguments: --nope"),
    ("route --ports 8 --flow 0>1 extra", "unrecognized arguments: extra"),
    ("verilog nope", "invalid choice: 'nope'"),
    ("verilog fabric", "the following arguments are required: --ports/-p"),
    ("verilog switch", "the following arguments are required: --ports/-p"),
    ("verilog crossbar", "the following arguments are required: --ports/-p"),
    ("sim cell", "the following arguments are required: kind"),
    ("sim cell x", "argument kind: invalid choice: 'x'"),
    ("sim nope", "invalid choice: 'nope'"),
    ("sim faults --rate 2", "--rate 2 is too large: must be <= 0.05"),     # as typed, not 2.0
    ("sim faults --ports 017", "--ports 017 is too large: must be <= 16"),
    ("sim faults --faults drop,fire", "--faults 'fire' is not one of drop, corrupt, duplicate, delay"),
    ("sim faults --faults drop,DROP", "--faults names 'DROP' twice"),
    ("sim faults --phases all-reduce,gather", "--phases 'gather' is not one of all-reduce"),
    ("sim faults --json extra", "unrecognized arguments: extra"),
    ("collective --network {d}/missing.yml --bit-error-rate 1e-9",
     "--bit-error-rate 1e-9 only applies with --fabric"),
    ("verilog r --lanes", "argument --lanes: expected one argument"),
    ("verilog switch --ports 4 --fabric nope", "argument --fabric: invalid choice: 'nope'"),
    ("verilog crossbar --ports 4 --variant nope", "argument --variant: invalid choice: 'nope'"),
    ("estimate --mode nope", "argument --mode: invalid choice: 'nope'"),
    ("sweep --rule 17", "argument --rule: invalid choice: 17"),
    ("characterize --area gates", "argument --area: invalid choice: 'gates'"),
    ("collective --phase xp", "argument --phase: invalid choice: 'xp'"),
    # element types and names
    ("verilog r --dtype fp8", "--dtype: unknown element type 'fp8'"),
    ("verilog switch --ports 4 --dtype fp64", "--dtype: unknown element type 'fp64'"),
    ("sim cell r --dtype half", "--dtype: unknown element type 'half'"),
    ("characterize --dtype bf8", "--dtype: unknown element type 'bf8'"),
    ("compare --dtype x", "--dtype: unknown element type 'x'"),
    ("timing --dtypes fp16,fp8", "--dtypes: unknown element type 'fp8'"),
    ("timing --fabric-ports 1", "--fabric-ports 1: a fabric has at least 2 ports"),
    ("timing --no-fpga --fpga-fabric-lanes 2", "--fpga-fabric-lanes 2 does not apply with --no-fpga"),
    ("timing --fabric-ports 0 --fpga-fabric-lanes 2", "--fpga-fabric-lanes 2 does not apply with --fabric-ports 0"),
    ("timing --timing {d}/missing.json", "missing.json: no such file"),
    ("verilog fabric --ports 12 --name 1abc", "--name '1abc' is not a Verilog module name"),
    ("verilog fabric --ports 12 --name 'a b'", "--name 'a b' is not a Verilog module name"),
    ("verilog fabric --ports 12 --name a-b", "--name 'a-b' is not a Verilog module name"),
    ("verilog fabric --ports 12 --name café", "--name 'café' is not a Verilog module name"),
    # sizes that cannot be generated in reasonable time, or do not fit
    ("verilog fabric --ports 64 --middle 3 --lanes 4", "FRED_3(64) with 4 fp16 lanes is too large"),
    ("verilog fabric --ports 12 --middle 64 --lanes 64", "more than the 65,535 Amaranth"),
    ("verilog fabric --ports 12 --middle 64 --lanes 8", "is too large to generate"),
    ("verilog switch --ports 64 --lanes 64", "more than the 65,535 Amaranth"),
    ("verilog switch --ports 64 --lanes 8", "is too large to generate"),
    ("verilog crossbar --ports 64 --lanes 4", "crossbar/tree with --ports 64 and --lanes 4 fp16 is too large"),
    ("verilog crossbar --ports 8 --lanes 1024", "is too large to generate in reasonable time"),
    ("verilog switch --ports 4 --max-len 60", "--max-len 60 does not fit --data-depth 48"),
    ("verilog switch --ports 4 --data-depth 8 --max-len 8", "--max-len 8 does not fit --data-depth 8"),
    ("verilog switch --ports 4 --table-entries 4 --table-bytes 100", "give --table-entries or --table-bytes, not both"),
    ("verilog switch --ports 4 --fabric ideal", "--fabric ideal adds lanes as integers: it needs --dtype int32"),
    ("verilog rd --middle 3", "--middle 3 does not apply to rd"),
    # route
    ("route", "--ports is required"),
    ("route --flow 0>1", "--ports is required"),
    ("route --ports 8", "nothing to route"),
    ("route --ports 8 --flow 0,0>1", "flow '0,0>1' inputs '0,0' names port 0 twice"),
    ("route --ports 8 --flow 0>1,1", "flow '0>1,1' outputs '1,1' names port 1 twice"),
    ("route --ports 8 --flow 0-3,2>4", "names port 2 twice"),
    ("route --ports 8 --flow 0-100000000000>1", "port 100000000000 is out of range"),
    ("route --ports 8 --flow 0>99999999999999999999999", "port 99999999999999999999999 is out of range"),
    ("route --ports 8 --flow '>1'", "flow '>1' has no input ports"),
    ("route --ports 8 --flow '0>'", "flow '0>' has no output ports"),
    ("route --ports 8 --flow ''", "flow '' must have the form INPUTS>OUTPUTS"),
    ("route --ports 8 --flow 0>>1", "flow '0>>1' must have the form INPUTS>OUTPUTS"),
    ("route --ports 8 --flow a>b", "'a' is not a port number"),
    ("route --ports 8 --flow 0,>1", "has an empty item"),
    ("route --ports 8 --flow 3-1>1", "range '3-1' is empty"),
    ("route --ports 8 --flow 9>1", "input port 9 is out of range for 8 ports"),
    ("route --ports 8 --flow 0>8", "output port 8 is out of range for 8 ports"),
    ("route --ports 8 --flow 0-3>4 --flow 0>5", "input port 0 is used by both flow #0 '0-3>4' and flow #1 '0>5'"),
    ("route --ports 8 --flow 0>4 --flow 1>4", "output port 4 is used by both"),
    ("route --ports 6 --middle 2 --flow 0,2>0,2 --flow 1,4>1,4 --flow 3,5>3,5", "routing conflict on FRED_2(6)"),
    ("route --ports 8 --middle 200 --flow 0>1", "--middle 200 is too large: must be <= 64"),
    ("route --ports 8 --collective all-reduce", "--collective all-reduce needs --group PORTS"),
    ("route --ports 8 --collective nope --group 0-3", "--collective 'nope' is unknown"),
    ("route --ports 8 --collective all-reduce --group 0,0,1", "--group '0,0,1' names port 0 twice"),
    ("route --ports 8 --collective all-reduce --group 0", "--group '0' has one port"),
    ("route --ports 8 --collective all-to-all --group 3", "--group '3' has one port"),
    ("route --ports 8 --collective all-reduce --group 0-9", "input port 8 is out of range for 8 ports"),
    ("route --ports 8 --collective all-reduce --group x", "--group 'x': 'x' is not a port number"),
    ("route --ports 8 --collective reduce --group 0-3", "reduce needs a root port (--root)"),
    ("route --ports 8 --collective gather --group 0-3", "gather needs a root port (--root)"),
    ("route --ports 8 --collective reduce --group 0-3 --root 9", "output port 9 is out of range for 8 ports"),
    ("route --ports 8 --collective all-reduce --group 0-3 --root 1", "--root 1 does not apply to all-reduce"),
    ("route --ports 8 --flow 0>1 --collective all-reduce --group 0-3", "give either --flow"),
    ("route --ports 8 --flow 0>1 --group 0-3", "--group '0-3' only applies with --collective"),
    ("route --ports 8 --flow 0>1 --root 1", "--root 1 only applies with --collective"),
    ("route --ports 8 --flow 0>1 --samples 5", "--samples 5 only applies with --study"),
    ("route --ports 8 --flow 0>1 --seed 5", "--seed 5 only applies with --study"),
    ("route --ports 8 --flow 0>1 --json --show-idle", "--show-idle only applies to the text output"),
    ("route --study --ports 48", "--ports 48 is too large for --study: must be <= 32"),
    ("route --study --middle 5", "--middle 5 does not apply to --study"),
    ("route --study --flow 0>1", "--flow '0>1' does not apply to --study"),
    ("route --study --collective all-reduce", "--collective 'all-reduce' does not apply to --study"),
    ("route --study --group 0-3", "--group '0-3' does not apply to --study"),
    ("route --study --root 1", "--root 1 does not apply to --study"),
    ("route --study --show-idle", "--show-idle does not apply to --study"),
    # sim cell: every value checked before the build
    ("sim cell rd --seed -1", "--seed -1 is too small: must be >= 0"),
    ("sim cell rd --seed 0x100000000", "--seed 4294967296 is too large"),
    ("sim cell rd --seed 99999999999999999999999", "--seed 99999999999999999999999 is too large"),
    ("sim cell rd --seed abc", "--seed 'abc' is not a whole number"),
    ("sim cell rd --seed 1_0", "--seed '1_0' is not a whole number"),
    ("sim cell rd --seed \u0661\u0662", "--seed '\u0661\u0662' is not a whole number"),
    ("sim cell rd --seed 0x", "--seed '0x' is not a whole number"),
    ("sim cell rd --middle 3", "--middle 3 does not apply to rd"),
    # characterize
    ("characterize --chiplets 12,12", "--chiplets names '12' twice"),
    ("characterize --chiplets 12,,10", "--chiplets '12,,10' has an empty item"),
    ("characterize --chiplets twelve", "--chiplets 'twelve' is not a whole number"),
    ("characterize --chiplets 64", "--chiplets 64: FRED_3(64) with 4 fp16 lanes is too large"),
    ("characterize --chiplets 20", "the switch is measured at the largest chiplet, 20 ports"),
    ("characterize --no-switch --switch-ports 4", "--switch-ports 4 does not apply with --no-switch"),
    ("characterize --no-switch --switch-packet-flits 4", "--switch-packet-flits 4 does not apply with --no-switch"),
    # compare
    ("compare --ports 4,4", "--ports names '4' twice"),
    ("compare --ports 64", "--ports 64: FRED_3(64) with 4 fp16 lanes is too large"),
    ("compare --ports 24 --lanes 8", "the crossbar/tree has 552 adders"),
    ("compare --no-sim --beats 100", "--beats 100 does not apply with --no-sim"),
    ("compare --no-sim --sim-lanes 2", "--sim-lanes 2 does not apply with --no-sim"),
    ("compare --no-sim --seed 3", "--seed 3 does not apply with --no-sim"),
    # collective: sizes
    ("collective --size 0.5", "--size '0.5' must be a whole number of bytes"),
    ("collective --size 3.5", "--size '3.5' must be a whole number of bytes"),
    ("collective --size 1.5B", "--size '1.5B' must be a whole number of bytes"),
    ("collective --size 1e30GiB", "--size '1e30GiB' is too large"),
    ("collective --size 2PiB", "--size '2PiB' is not a size"),
    ("collective --size 1e400", "--size '1e400' is too large"),
    ("collective --size 0", "--size '0' is too small: must be >= 1"),
    ("collective --size 0GiB", "--size '0GiB' is too small: must be >= 1"),
    ("collective --size=-1", "--size '-1' is not a size"),
    ("collective --size=-1GiB", "--size '-1GiB' is not a size"),
    ("collective --size ''", "--size '' is not a size"),
    ("collective --size inf", "--size 'inf' is not a size"),
    ("collective --size nan", "--size 'nan' is not a size"),
    ("collective --size 1XB", "--size '1XB' is not a size"),
    ("collective --size 1G1", "--size '1G1' is not a size"),
    ("collective --size 'GiB'", "--size 'GiB' is not a size"),
    ("collective --size 1,000", "--size '1,000' is not a size"),
    # collective: groups, roots, fabrics
    ("collective --group 0", "--group '0' has one NPU: all-reduce needs at least 2"),
    ("collective --op p2p --group 0", "--group '0' has one NPU: p2p needs at least 2"),
    ("collective --op all-to-all --group 3", "--group '3' has one NPU"),
    ("collective --op multicast --group 3", "--group '3' has one NPU"),
    ("collective --op reduce-scatter --group 19", "--group '19' has one NPU"),
    ("collective --group 0,0,1", "group '0,0,1' names an NPU twice"),
    ("collective --group 0-20", "NPU 20 in group '0-20' outside the topology"),
    ("collective --group 0-100000000000", "outside the topology"),
    ("collective --group x", "bad group 'x'"),
    ("collective --group 5-3", "bad NPU range '5-3'"),
    ("collective --strategy MP(20) --phase dp", "every DP group has one NPU"),
    ("collective --strategy MP(2)-DP(10) --phase pp", "every PP group has one NPU"),
    ("collective --strategy MP(3) --phase mp", "--strategy: strategy MP(3)-DP(1)-PP(1) uses 3 NPUs, not 20"),
    ("collective --strategy MP(0)-DP(20) --phase mp", "MP(0) must be >= 1"),
    ("collective --strategy MP(2)-MP(10) --phase mp", "MP given twice"),
    ("collective --strategy nope --phase mp", "cannot parse 'nope'"),
    ("collective --strategy MP(2)-DP(10)", "--strategy needs --phase"),
    ("collective --phase dp", "--phase needs --strategy"),
    ("collective --strategy MP(2)-DP(10) --phase dp --group 0-3", "give either --group or --strategy"),
    ("collective --root 3", "--root 3 does not apply to all-reduce"),
    ("collective --op all-gather --root 3", "--root 3 does not apply to all-gather"),
    ("collective --op io-broadcast --root 3", "--root 3 does not apply to io-broadcast"),
    ("collective --op reduce --root 30", "--root 30 is not an NPU of Mesh (0..19)"),
    ("collective --op nope", "--op: unknown collective 'nope'"),
    ("collective --fabric nope", "--fabric: unknown fabric 'nope'"),
    ("collective --fabric mesh,mesh", "--fabric names 'mesh' twice"),
    ("collective --fabric mesh --fabric Mesh", "--fabric names 'Mesh' twice"),
    ("collective --fabric all,mesh", "'all' already names every fabric"),
    ("collective --fabric mesh,,fred-d", "has an empty item"),
    ("collective --algorithm nope", "--algorithm: unknown algorithm 'nope'"),
    ("collective --algorithm in-switch", "algorithm 'in-switch' needs switches with in-network reduction"),
    ("collective --fabric fred-d --algorithm hier2d", "algorithm 'hier2d' needs a 2D mesh or torus; 'Fred-D' is not one"),
    ("collective --algorithm hier-direct", "algorithm 'hier-direct' needs a FRED tree and equal NPUs per L1 switch"),
    ("collective --fabric fred-a --algorithm hier-direct --group 0,1,4",
     "algorithm 'hier-direct' needs a FRED tree and equal NPUs per L1 switch, not group [0, 1, 4]"),
    ("collective --fabric fred-a --op all-to-all --algorithm hier-direct", "all-to-all supports algorithms direct and shift"),
    ("collective --op all-to-all --algorithm ring", "all-to-all supports algorithms direct and shift"),
    ("collective --gb-bytes 1e9", "--gb-bytes 1e9 only applies with --network"),
    ("collective --fabric fred-d --gb-bytes 1e9", "--gb-bytes 1e9 only applies with --network"),
    ("collective --network {d}/torus.yml --fabric fred-d", "--fabric 'fred-d' does not apply with --network"),
    ("collective --network {d}/torus.yml --algorithm hier2d --group 0-63",
     "algorithm 'hier2d' does not run on ASTRA-sim YAML networks"),
    ("collective --network {d}/torus.yml --group 0-64", "NPU 64 in group '0-64' outside the topology"),
    # collective: network files
    ("collective --network {d}/one.yml", "npus_count[0] 1 is too small: must be >= 2 (in {d}/one.yml)"),
    ("collective --network {d}/huge.yml", "npus_count[0] 1000000000 is too large: must be <= 4096"),
    ("collective --network {d}/big4.yml", "describes 16,777,216 NPUs, more than the 4,096"),
    ("collective --network {d}/ring4096.yml", "this simulation needs more than 10,000,000 tasks"),
    ("collective --network {d}/ring4096.yml --op all-to-all", "this simulation needs more than 10,000,000 tasks"),
    ("collective --network {d}/ring4096.yml --algorithm ring2 --chunks 1024", "needs more than 10,000,000 tasks"),
    ("collective --network {d}/bw_huge.yml", "bandwidth[0] 1e+300 is too large"),
    ("collective --network {d}/lat_huge.yml", "latency[0] 1e+300 is too large"),
    ("collective --network {d}/bw_zero.yml", "bandwidth[0] 0 is too small: must be > 0"),
    ("collective --network {d}/lat_neg.yml", "latency[0] -1 is too small: must be >= 0"),
    ("collective --network {d}/bw_str.yml", "bandwidth[0] must be a number, not str 'fast'"),
    ("collective --network {d}/bw_nan.yml", "bandwidth[0] nan must be a finite number"),
    ("collective --network {d}/bw_inf.yml", "bandwidth[0] inf must be a finite number"),
    ("collective --network {d}/npus_frac.yml", "npus_count[0] must be an integer, not float 8.5"),
    ("collective --network {d}/npus_str.yml", "npus_count[0] must be an integer, not str 'eight'"),
    ("collective --network {d}/npus_bool.yml", "npus_count[0] must be an integer, not bool True"),
    ("collective --network {d}/npus_null.yml", "npus_count[0] must be an integer, not NoneType"),
    ("collective --network {d}/kind.yml", "unknown topology 'Torus'"),
    ("collective --network {d}/lengths.yml", "'npus_count' has 2 entries but 'topology' has 1"),
    ("collective --network {d}/empty_dims.yml", "network needs at least one dimension"),
    ("collective --network {d}/missing.yml", "missing key 'latency'"),
    ("collective --network {d}/unknown.yml", "unknown key 'links'"),
    ("collective --network {d}/gb_tiny.yml", "gb_bytes 1e-300 is too small"),
    ("collective --network {d}/gb_str.yml", "gb_bytes must be a number, not str 'lots'"),
    ("collective --network {d}/list.yml", "expected a mapping"),
    ("collective --network {d}/scalar.yml", "expected a mapping"),
    ("collective --network {d}/blank.yml", "expected a mapping"),
    ("collective --network {d}/broken.yml", "malformed YAML"),
    ("collective --network {d}/tab.yml", "malformed YAML"),
    ("collective --network {d}/binary.bin", "network file '{d}/binary.bin': line 1: not UTF-8 text (byte 0)"),
    ("collective --network {d}/folder.yml", "cannot read network file"),
    ("collective --network {d}/absent.yml", "network file '{d}/absent.yml' not found"),
    # timing files (every command that reads one)
    ("collective --timing {d}/t_lat_huge.json", "field summary.switch_latency_cycles = 1e+300 is too large"),
    ("collective --timing {d}/t_lat_null.json", "field summary.switch_latency_cycles = None has the wrong type"),
    ("collective --timing {d}/t_lat_str.json", "field summary.switch_latency_cycles = '30' has the wrong type"),
    ("collective --timing {d}/t_lat_zero.json", "field summary.switch_latency_cycles = 0 must be > 0"),
    ("collective --timing {d}/t_lat_neg.json", "field summary.switch_latency_cycles = -30 must be > 0"),
    ("collective --timing {d}/t_lat_bool.json", "field summary.switch_latency_cycles = True has the wrong type"),
    ("collective --timing {d}/t_bpc_big.json", "summary.beats_per_cycle_per_port = 2.0 exceeds 1 beat per cycle"),
    ("collective --timing {d}/t_bpc_zero.json", "summary.beats_per_cycle_per_port = 0 must be > 0"),
    ("collective --timing {d}/t_phase_str.json", "field summary.phase_switch_cycles = '7' has the wrong type"),
    ("collective --timing {d}/t_phase_huge.json", "field summary.phase_switch_cycles = 1e+300 is too large"),
    ("collective --timing {d}/t_phase_neg.json", "field summary.phase_switch_cycles = -1 must be >= 0"),
    ("collective --timing {d}/t_pre_neg.json", "field summary.preemption_cycles_max = -5 must be >= 0"),
    ("collective --timing {d}/t_pre_list.json", "field summary.preemption_cycles_max = [35] has the wrong type"),
    ("collective --timing {d}/t_act_big.json", "summary.activation_cycles = 100 exceeds preemption_cycles_max = "),
    ("collective --timing {d}/t_fab_lat.json", "is not fabric_latency_cycles + switch_overhead_cycles"),
    ("collective --timing {d}/t_overhead_str.json", "field summary.switch_overhead_cycles = '9' has the wrong type"),
    ("collective --timing {d}/t_chiplets.json", "field summary.chiplets = 'FRED_3(12)' has the wrong type"),
    ("collective --timing {d}/t_no_summary.json", "missing field summary"),
    ("collective --timing {d}/t_summary_list.json", "field summary = [] has the wrong type"),
    ("collective --timing {d}/t_version.json", "schema version 9, this fred reads versions 1, 2, 3"),
    ("collective --timing {d}/t_kind.json", "not a FRED timing file (kind 'something-else'"),
    ("collective --timing {d}/t_lanes_zero.json", "field rtl.lanes = 0 must be > 0"),
    ("collective --timing {d}/t_dtype_num.json", "field rtl.dtype = 16 has the wrong type"),
    ("collective --timing {d}/t_no_source.json", "missing field source"),
    ("collective --timing {d}/t_seed_str.json", "field seed = '1' has the wrong type"),
    ("collective --timing {d}/t_fab_kind_huge.json", ".latency_cycles.reduce = 1e+300 is too large"),
    ("collective --timing {d}/t_fab_bpc_big.json", ".beats_per_cycle_per_port.unicast = 7.0 is too large"),
    ("collective --timing {d}/t_corrupt.json", "timing file {d}/t_corrupt.json: corrupt JSON"),
    ("collective --timing {d}/t_list.json", "not a JSON object"),
    ("collective --timing {d}/t_empty.json", "corrupt JSON"),
    ("collective --timing {d}/t_nan.json", "summary.switch_latency_cycles = nan must be > 0 and finite"),
    ("collective --timing {d}/t_deep.json", "corrupt JSON (nested too deeply)"),
    ("collective --timing {d}/binary.bin", "timing file {d}/binary.bin: line 1: not UTF-8 text (byte 0)"),
    ("collective --timing {d}/folder.yml", "is a directory"),
    ("collective --timing {d}/absent.json", "timing file {d}/absent.json: no such file"),
    ("estimate --timing {d}/t_lat_huge.json", "field summary.switch_latency_cycles = 1e+300 is too large"),
    ("estimate --timing {d}/t_act_big.json", "summary.activation_cycles = 100 exceeds"),
    ("estimate --timing {d}/t_phase_str.json", "summary.phase_switch_cycles = '7' has the wrong type"),
    ("estimate --timing {d}/absent.json", "no such file"),
    ("sweep --timing {d}/t_lat_null.json", "summary.switch_latency_cycles = None has the wrong type"),
    ("sweep --timing {d}/t_corrupt.json", "corrupt JSON"),
    # estimate and sweep
    ("estimate --microbatches 0", "--microbatches 0 is too small: must be >= 1"),
    ("estimate --microbatches 1000000", "--microbatches 1000000 is too large: must be <= 1024"),
    ("estimate --microbatches 64", "--microbatches 64 exceeds the 16 samples per replica of resnet-152"),
    ("estimate -w transformer-17b --microbatches 32 --samples 16", "--microbatches 32 exceeds the 16 samples"),
    ("estimate --samples 0.5", "--samples '0.5' is not a whole number"),
    ("estimate -w nope", "--workload: unknown workload 'nope'"),
    ("estimate -w resnet-152,resnet-152", "--workload names 'resnet-152' twice"),
    ("estimate -w resnet-152 -w resnet152", "--workload names 'resnet152' twice"),
    ("estimate -w {d}/w_list.yml", "expected a mapping at top level"),
    ("estimate -w {d}/w_missing.yml", "missing field 'layers'"),
    ("estimate -w {d}/w_heads.yml", "hidden 10 is not a multiple of heads 3"),
    ("estimate -w {d}/w_neg.yml", "field 'layers' = -2 is too small: must be >= 1"),
    ("estimate -w {d}/w_broken.yml", "malformed YAML"),
    ("estimate -f nope", "--fabric: unknown fabric 'nope'"),
    ("estimate -f mesh,mesh", "--fabric names 'mesh' twice"),
    ("estimate -f mesh -f fred-d -f fred_d", "--fabric names 'fred_d' twice"),
    ("estimate -s MP(3)", "--strategy: strategy MP(3)-DP(1)-PP(1) uses 3 NPUs, not 20"),
    ("estimate -s nope", "--strategy: bad strategy 'nope'"),
    ("estimate -s MP(2)-DP(5)-PP(2)-PP(1)", "PP given twice"),
    ("estimate -w resnet-152 -s MP(2)-DP(5)-PP(3)", "uses 30 NPUs, not 20"),
    ("estimate -w gpt3-175b -f mesh --mode weight-stationary", "does not fit in HBM"),
    # infer
    ("infer -w resnet-152", "--workload 'resnet-152' is a resnet model: fred infer serves decoder transformers"),
    ("infer -w nope", "--workload: unknown workload 'nope'"),
    ("infer -w llama2-70b,llama2-70b", "--workload names 'llama2-70b' twice"),
    ("infer -w {d}/w_heads.yml", "hidden 10 is not a multiple of heads 3"),
    ("infer -f nope", "--fabric: unknown fabric 'nope'"),
    ("infer -s MP(3)", "--strategy: strategy MP(3)-DP(1)-PP(1) uses 3 NPUs, not 20"),
    ("infer -s nope", "--strategy: bad strategy 'nope'"),
    ("infer -s MP(1)-EP(4)-DP(5)-PP(1)", "EP(4) needs a mixture-of-experts workload; llama2-70b has no experts"),
    ("infer -w mixtral-8x7b -s MP(1)-EP(5)-DP(4)-PP(1)", "EP(5) must divide the 8 experts of mixtral-8x7b"),
    ("infer -w mixtral-8x7b -s MP(1)-EP(4)-DP(4)-PP(1)", "strategy MP(1)-EP(4)-DP(4)-PP(1) uses 16 NPUs, not 20"),
    ("infer --all-to-all-method online", "--all-to-all-method 'online' only applies to a mixture-of-experts model"),
    ("infer -w mixtral-8x7b -f mesh --all-to-all-method online", "--all-to-all-method 'online' only applies with a FRED fabric (fred-a..fred-d), not mesh"),
    ("estimate -w resnet-152 -f mesh --all-to-all-method online", "--all-to-all-method 'online' only applies with a FRED fabric"),
    ("estimate -w resnet-152 --all-to-all-method precompiled", "only applies to a mixture-of-experts model (its expert all-to-alls), not resnet-152"),
    ("estimate -w mixtral-8x7b -f fred-d -s MP(4)-DP(5)-PP(1) --all-to-all-method online", "only applies with expert parallelism EP(e > 1) in --strategy, not MP(4)-DP(5)-PP(1)"),
    ("sweep -w resnet-152 --all-to-all-method online", "only applies to a mixture-of-experts model"),
    ("scan -w resnet-152 -f fred-d --all-to-all-method online", "only applies to a mixture-of-experts model"),
    ("infer --all-to-all-method nope", "--all-to-all-method 'nope' is unknown; known: precompiled, online"),
    ("infer --a2a-method greedy", "--all-to-all-method 'greedy' is unknown; known: precompiled, online"),
    ("infer --all-to-all-method online --all-to-all-method online", "--all-to-all-method given twice ('online' and 'online')"),
    ("infer --npu a100", "--npu 'a100' is unknown; known: h100, b200"),
    ("infer --prompt-tokens 4000", "prompt tokens 4000 + output tokens 256 exceed its context window of 4096"),
    ("infer -w gpt3-175b --output-tokens 2000", "output tokens 2000 exceed its context window of 2048"),
    ("infer --batch 4096", "MP(4)-DP(1)-PP(5), batch 4096 x 1280 tokens does not fit in HBM: weights 7.0 GB + KV cache"),
    ("infer -s MP(1)-DP(20)-PP(1)", "weights 137.5 GB + KV cache"),
    ("infer -w gpt3-175b -s MP(4)-DP(5)-PP(1)", "does not fit in HBM"),
    ("infer -w llama2-70b --batch 2 --batch 3", "--batch given twice"),
    ("infer --plot {d}/x.txt", "--plot '{d}/x.txt': file type '.txt'"),
    ("infer --plot {d}", "--plot '{d}': is a folder"),
    ("infer --timing {d}/t_lat_huge.json", "field summary.switch_latency_cycles = 1e+300 is too large"),
    ("sweep -w nope", "--workload: unknown workload 'nope'"),
    ("estimate --npu a100", "--npu 'a100' is unknown; known: h100, b200"),
    ("estimate --memory swap", "--memory 'swap' is unknown"),
    ("estimate --trace-header DATA", "--trace-header 'DATA' needs --trace FILE"),
    ("estimate --trace-clock-ghz 2", "--trace-clock-ghz 2 needs --trace FILE"),
    ("estimate --trace {d}/absent.txt", "trace file '{d}/absent.txt' does not exist"),
    ("estimate --trace {d}/notes.txt --trace-header DATA -w resnet-152", "--workload 'resnet-152' does not apply to --trace"),
    ("estimate --trace {d}/notes.txt --trace-header DATA --tflops 5", "--tflops 5 does not apply to --trace"),
    ("estimate --trace {d}/notes.txt", "field kind: no header"),
    ("sweep --workers 2 --scheduler tcp://127.0.0.1:1", "--workers 2 and --scheduler 'tcp://127.0.0.1:1' exclude each other"),
    ("scan -w nope", "--workload: unknown workload 'nope'"),
    ("scan -f mesh,mesh", "--fabric names 'mesh' twice"),
    ("scan --samples 16,16", "--samples names '16' twice"),
    ("scan --k-min 10 --k-max 1", "--k-max 1 must be above --k-min 10 for 20 points"),
    ("scan -w resnet-152 --microbatches 64", "--microbatches 64 exceeds the 16 samples per replica of resnet-152"),
    ("scan --plot {d}/scan.txt", "--plot '{d}/scan.txt': file type '.txt'"),
    ("sweep -w resnet-152 -f mesh -f mesh", "--fabric names 'mesh' twice"),
    ("sweep -w resnet-152 -f nope", "--fabric: unknown fabric 'nope'"),
]

#: output paths: refused before any work, the target never created (fred.contract.outputs)
OUTPUTS = [
    ("verilog rd -o ''", "--output '': empty file name"),
    ("verilog rd -o {d}", "--output '{d}': is a folder"),
    ("verilog rd -o {d}/", "--output '{d}/': names a folder"),
    ("verilog rd -o /dev/full", "--output '/dev/full': is not a regular file"),
    ("verilog rd -o /proc/version", "--output '/proc/version'"),
    ("verilog rd -o {d}/notes.txt/x.v", "--output '{d}/notes.txt/x.v'"),
    ("verilog switch --ports 4 -o {d}", "--output '{d}': is a folder"),
    ("verilog fabric --ports 12 -o /dev/full", "--output '/dev/full': is not a regular file"),
    ("characterize -o ''", "--output '': empty file name"),
    ("characterize -o {d}", "--output '{d}': is a folder"),
    ("characterize -o /dev/full", "--output '/dev/full': is not a regular file"),
    ("characterize -o {d}/notes.txt/t.json", "--output '{d}/notes.txt/t.json'"),
    ("estimate -w resnet-152 -f mesh --plot ''", "--plot '': empty file name"),
    ("estimate -w resnet-152 -f mesh --plot {d}", "--plot '{d}': is a folder"),
    ("estimate -w resnet-152 -f mesh --plot /dev/full", "--plot '/dev/full': is not a regular file"),
    ("estimate -w resnet-152 -f mesh --plot {d}/x.txt", "--plot '{d}/x.txt': file type '.txt'"),
    ("estimate -w resnet-152 -f mesh --plot {d}/notes.txt/x.png", "--plot '{d}/notes.txt/x.png'"),
    ("sweep -w resnet-152 --plot ''", "--plot '': empty file name"),
    ("sweep -w resnet-152 --plot {d}", "--plot '{d}': is a folder"),
    ("sweep -w resnet-152 --plot {d}/x.txt", "--plot '{d}/x.txt': file type '.txt'"),
]

#: classes of failures the fuzz harness (tests/cli/cli_fuzz.py) found, one case each
FUZZED = [
    # an option that takes one value given twice (argparse kept the last one silently)
    ("collective --size 1MiB --size 2MiB", "--size given twice ('1MiB' and '2MiB'); give it once"),
    ("route --ports 8 --flow 0>1 -p 9", "--ports given twice ('8' and '9')"),
    ("collective --json --json", "--json given twice; give it once"),
    ("estimate --utilization 0.5 --utilisation 0.6", "--utilisation given twice"),
    # --option=-- (argparse made it an empty list, which reached the model)
    ("collective --size=--", "--size '--' is not a value"),
    ("estimate --hbm-gb=--", "--hbm-gb '--' is not a value"),
    # numbers: ASCII digits only, no 4,300-digit conversions
    ("collective --chunks " + "9" * 5000, "(5,000 characters) is too large"),
    ("estimate --tflops 1_0", "--tflops '1_0' is not a number"),
    ("estimate --tflops \uff11\uff12", "--tflops '\uff11\uff12' is not a number"),
    ("compare --ports " + "1" * 200, "is too large"),
    ("route --ports 8 --flow 0>" + "1" * 5000, "is not a port number"),
    # 0 is a value: an option that does not apply is refused at 0 too
    ("route --ports 8 --flow 0>1 --root 0", "--root 0 only applies with --collective"),
    ("route --ports 8 --flow 0>1 --seed 0", "--seed 0 only applies with --study"),
    ("collective --root 0", "--root 0 does not apply to all-reduce"),
    # options that do not apply to the mode chosen
    ("collective --size-is input", "--size-is 'input' does not apply to all-reduce"),
    ("estimate --trace {d}/notes.txt --io-bw 3", "--io-bw 3 does not apply to --trace"),
    ("estimate -w resnet-152 --stream-steps 2", "--stream-steps 2 only applies to weight-streaming runs"),
    ("sweep -w transformer-1t --granularity 3 --workers 0", "--granularity 3 only applies to weight-stationary runs"),
    ("scan --plot ''", "--plot '': empty file name"),
    ("characterize --area-lanes 1024", "--area-lanes 1024 (chiplet of 12 ports)"),
    # input files that are not regular files (a FIFO or /dev/zero: the read never ended), or too large
    ("collective --network {d}/fifo.yml", "cannot read network file '{d}/fifo.yml': is not a regular file (a FIFO)"),
    ("collective --network /dev/zero", "is not a regular file (a character device)"),
    ("collective --network {d}/big.yml", "is too large (2,000,000 bytes; at most 1,048,576)"),
    ("collective --timing /dev/zero", "timing file /dev/zero: is not a regular file"),
    ("estimate --trace {d}/fifo.yml", "trace file '{d}/fifo.yml': is not a regular file (a FIFO)"),
    ("estimate -w /dev/zero", "workload file '/dev/zero': is not a regular file"),
    ("collective --network {d}/ring4.yml --chakra {d}/et_longer", "all_reduce.2.et: 2 operations, all_reduce.0.et has 1"),
    # values a file may not hold
    ("collective --network {d}/bw_tiny.yml", "bandwidth[0] 1e-300 is too small: must be >= 0.001"),
    ("estimate --trace {d}/cycles.txt", "field 3 (forward compute cycles): '9223372036854775807' is too large"),
    ("estimate --trace {d}/bytes.txt", "field 11 (weight-gradient comm bytes): '2251799813685248' is too large"),
    ("collective --network {d}/ring4.yml --chakra {d}/et_huge", "has comm_size 9,223,372,036,854,775,808; at most"),
    ("estimate -w {d}/w_inf.yml", "field 'layers' = inf is not a whole number"),
    ("estimate -w {d}/w_many.yml", "field 'layers' = 1000000000 is too large: must be <= 2048"),
    ("estimate -w {d}/w_text.yml", "field 'layers' = '8' is not a whole number"),
    ("estimate -w {d}/w_ffn.yml", "field 'ffn_mult' = nan must be a finite number"),
    ("estimate -w {d}/w_mb.yml", "field 'microbatches' = 32 exceeds samples_per_replica 16"),
    ("estimate -w {d}/w_strategy.yml", "field 'strategy': bad strategy '1180591620717411303424'"),
    ("estimate -w {d}/w_blocks.yml", "field 'blocks' = 1000000 is too large: must be <= 1000"),
    ("estimate -w {d}/w_layers.yml", "field 'layer_list[0]' = 1 must be a mapping"),
    # a long value is shortened in the one line
    ("route --ports 8 --flow " + "x" * 5000, "' (5,002 characters) must have the form"),
    # issue 24: the goodput curve of a timing file is checked point by point
    ("collective --timing {d}/t_lf_above_one.json", "link_faults.points[1].goodput = 1.5 is too large: must be <= 1"),
    ("estimate --timing {d}/t_lf_rising.json", "link_faults.points[2].goodput = "),
    ("estimate --timing {d}/t_lf_rising.json", "goodput cannot rise with the fault rate"),
    # the same file twice would run twice (as a repeated workload is refused)
    ("estimate --trace {d}/cycles.txt --trace {d}/cycles.txt", "--trace '{d}/cycles.txt' given twice"),
    ("estimate --trace {d}/cycles.txt --trace {d}/./cycles.txt", "--trace '{d}/./cycles.txt' is"),
    ("route --ports 8 --flow 0>1 --flow 0>1", "--flow '0>1' given twice"),
    # refusals after parsing name the number as typed
    ("estimate --trace-clock-ghz 5", "--trace-clock-ghz 5 needs --trace FILE"),
    ("estimate --bit-error-rate 1e-5", "bit-error-rate 1e-5 is beyond the goodput curve"),
    ("sweep --tflops 2.50 --memory none --memory-choice shared", "--memory-choice shared applies to --memory auto"),
    # one name where a list was typed
    ("sweep -w resnet-152,gpt3-175b", "--workload takes one name, not a list: 'resnet-152,gpt3-175b'"),
    ("estimate --npu h100,b200", "--npu takes one name, not a list: 'h100,b200'"),
    ("collective --network {d}/ring4.yml --chakra {d}/ring4.yml", "is a file, not a directory"),
    ("--version extra", "--version takes nothing after it, got 'extra'"),
    ("estimate --memory-choice mine", "--memory-choice"),
]

ALL = _int_cases() + _number_cases() + _negative_cases() + _name_cases() + CASES + FUZZED


class _Hang(Exception):
    pass


@pytest.fixture
def watchdog():
    """Fail (instead of hanging) when a command line runs longer than :data:`WATCHDOG_S`; a
    build or simulation it started is killed with it."""
    def ring(signum, frame):
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        raise _Hang(f"still running after {WATCHDOG_S} s: the command started work instead of refusing")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(WATCHDOG_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _run(capsys, d, line):
    argv = shlex.split(line.format(d=d))
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _check(rc, out, err, fragment, line):
    assert rc == 2, f"{line!r} exited {rc}: {err or out[:200]}"
    assert out == "", f"{line!r} wrote to stdout: {out[:200]!r}"
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fred: error: "), f"{line!r}: {err!r}"
    assert "Traceback" not in err
    assert fragment in lines[0], f"{line!r}: expected {fragment!r} in {lines[0]!r}"


def test_the_suite_is_large():
    assert len(ALL) + len(OUTPUTS) >= 400


@pytest.mark.parametrize("line,fragment", ALL, ids=[c[0][:100] for c in ALL])
def test_bad_command_line(capsys, d, watchdog, line, fragment):
    rc, out, err = _run(capsys, d, line)
    _check(rc, out, err, fragment.format(d=d), line)


def _outputs_checked() -> bool:
    try:
        import fred.contract.outputs  # noqa: F401  (lands with the atomic-output work, issue 12 item 2)
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _outputs_checked(), reason="fred.contract.outputs (output path checks) not here yet")
@pytest.mark.parametrize("line,fragment", OUTPUTS, ids=[c[0] for c in OUTPUTS])
def test_bad_output_path(capsys, d, watchdog, line, fragment):
    before = set(os.listdir(d))
    rc, out, err = _run(capsys, d, line)
    _check(rc, out, err, fragment.format(d=d), line)
    assert set(os.listdir(d)) == before, "an output (or a temporary file) was left behind"


#: a sample through a real process: the exit status and stderr a shell sees
SUBPROCESS = ["verilog r --lanes 100000", "verilog switch --ports 12 --data-depth 1000000000",
              "collective --chunks 100000000", "collective --network {d}/huge.yml", "collective --network {d}/one.yml",
              "estimate --microbatches 1000000", "collective --size 1e30GiB", "estimate --tflops inf",
              "sim cell rd --seed -1", "route --ports 8 --flow 0,0>1", "collective --timing {d}/t_act_big.json",
              "estimate -w {d}/w_list.yml", "collective --network /dev/zero", "collective --size 1 --size 2",
              "collective --size=--", "estimate -w {d}/w_inf.yml"]


@pytest.mark.parametrize("line", SUBPROCESS)
def test_no_traceback_in_a_real_process(d, line):
    r = subprocess.run([sys.executable, "-m", "fred", *shlex.split(line.format(d=d))], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("fred: error: ") and r.stderr.count("\n") == 1, r.stderr


# ---- the fuzz harness (tests/cli/cli_fuzz.py): a fixed sample here, every case under regress ---------
#: "ignored" outcomes that are right: on that command line the value given is what the command
#: chooses anyway (or a bound the run never reaches), so the output is the same without it
IGNORED_OK = {
    "--group 0-3": "the whole 4-NPU network, the default group",
    "--chunks 1": "the algorithm's own choice for the small sizes of the bases",
    "--granularity 256": "more buckets than ResNet-152's stages have layers",
    "--granularity 255": "more buckets than ResNet-152's stages have layers",
    "--npu-bw 0.001": "the mesh's links are --mesh-link-bw; --npu-bw is FRED's NPU port",
    "--samples 8": "(route --study) the samples of a 1-sample study",
    "--memory none": "ResNet-152 fits without a memory policy: auto chooses none",
    "--size-is input": "with --network, input is the default",
    "--root 0": "the group's first NPU, the default root",
    "--timing default": "the embedded timing file, the default",
    "--microbatches 1": "ResNet-152's own microbatch count",
    "--mode weight-stationary": "ResNet-152's own mode",
}


def _fuzz_problems(cases, folder) -> list[str]:
    import cli_fuzz

    report = cli_fuzz.run_cases(cases, folder)
    out = []
    for case, o, ps in report.failures:
        ps = [p for p in ps if not (p.startswith("ignored") and any(k in case.line() for k in IGNORED_OK))]
        out += [f"{case.line()[:200]} -> {p[:300]}" for p in ps]
    return out


def _fuzz_cases(folder, sample: int | None, seed: int = 1):
    import random

    import cli_fuzz_cases
    import cli_fuzz_files

    options = cli_fuzz_cases.option_cases(str(folder), seed=seed)
    files = cli_fuzz_files.file_cases(str(folder), per_file=40 if sample is None else 2, seed=seed)
    if sample is None:
        return options + files
    rng = random.Random(seed)
    refused = [c for c in options if c.must_fail]
    others = [c for c in options if not c.must_fail and not c.argv[0] in ("estimate", "sweep", "scan")]
    return rng.sample(refused, min(sample, len(refused))) + rng.sample(others, min(sample // 10, len(others))) + files


def test_fuzz_sample(tmp_path, monkeypatch):
    """A fixed sample of the fuzz harness's cases (bad values of every option type, options twice,
    mutated input files): no traceback, hang, stray exit status, unnamed or multi-line refusal,
    accepted bad value or non-finite result."""
    monkeypatch.chdir(tmp_path)
    bad = _fuzz_problems(_fuzz_cases(tmp_path / "files", sample=250), tmp_path / "files")
    assert not bad, f"{len(bad)} problems:\n" + "\n".join(bad[:40])


#: the whole fuzz set runs in this many shards (one test each), so that make regress-model's
#: workers share it (about 1 h of CPU in all)
FUZZ_SHARDS = 4


@pytest.mark.regress
@pytest.mark.parametrize("shard", range(FUZZ_SHARDS))
def test_fuzz_everything(tmp_path, monkeypatch, shard):
    """Every case of the fuzz harness: ~12,700 option cases and ~900 mutated files, in
    :data:`FUZZ_SHARDS` shards (every shard-th case)."""
    monkeypatch.chdir(tmp_path)
    bad = _fuzz_problems(_fuzz_cases(tmp_path / "files", sample=None)[shard::FUZZ_SHARDS], tmp_path / "files")
    assert not bad, f"{len(bad)} problems:\n" + "\n".join(bad[:80])


def test_fuzz_harness_catches(tmp_path):
    """The harness's judge fails each kind of fault (a stand-in command for each)."""
    import cli_fuzz
    from cli_fuzz import Case, Outcome, problems

    case = Case(["x", "--size", "7"], names=[["--size"], ["7"]], must_fail=True)
    assert problems(case, Outcome(None, "", "", 0.1, crash="Traceback ...\nKeyError: 3"))[0].startswith("traceback")
    assert problems(case, Outcome(None, "", "", 40, crash="hang"))[0].startswith("hang")
    assert problems(case, Outcome(1, "", "fred: error: --size 7 bad\n", 0.1)) == ["exit 1"]
    assert problems(case, Outcome(2, "", "fred: error: --size 7\nmore\n", 0.1))[0].startswith("error form")
    assert problems(case, Outcome(2, "", "fred: error: something is wrong\n", 0.1))[0].startswith("unnamed")
    assert problems(case, Outcome(0, "fine\n", "", 0.1)) == ["accepted"]
    free = Case(["x"])
    assert problems(free, Outcome(0, "time 1.0 nan s\n", "", 0.1))[0].startswith("non-finite")
    assert problems(free, Outcome(0, '{"time_s": -1.5}', "", 0.1))[0].startswith("non-finite")
    assert problems(free, Outcome(0, "a\n", "", 0.1), reference=Outcome(0, "a\n", "", 0.1))[0].startswith("ignored")
    assert problems(case, Outcome(2, "", "fred: error: --size 7 is too large\n", 0.1)) == []
    with cli_fuzz.heavy_work_stopped():  # the slow work is stopped, and put back after
        from fred.sim.characterize import run as characterize

        with pytest.raises(cli_fuzz.WorkStarted):
            characterize.characterize()
    assert characterize.characterize is not cli_fuzz._stand_in
