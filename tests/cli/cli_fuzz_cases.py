"""Option cases of the CLI fuzz harness (:mod:`cli_fuzz`): every option of every command, found
by walking the real parsers, given nasty values for its type, given twice, and given on the
command lines of each mode of its command (where it may not apply).

``BASES`` are small, valid command lines of each command (one per mode: ``collective`` on a
fabric, on a YAML network, on a Chakra trace ...); each option case adds one option to one.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil

from cli_fuzz import Case

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
ROOT = os.path.dirname(HERE)
#: the shared/ folder beside the checkout (a git worktree sits one level deeper)
SHARED = next((p for p in (os.environ.get("FRED_SHARED", ""), os.path.join(os.path.dirname(ROOT), "shared"),
                           os.path.join(os.path.dirname(os.path.dirname(ROOT)), "shared")) if p and os.path.isdir(p)),
              os.path.join(os.path.dirname(ROOT), "shared"))

#: command path -> small valid command lines, one per mode ({d}: the case folder)
BASES = {
    ("verilog", "r"): [["verilog", "r"]],
    ("verilog", "d"): [["verilog", "d"]],
    ("verilog", "rd"): [["verilog", "rd"]],
    ("verilog", "fabric"): [["verilog", "fabric", "--ports", "4"]],
    ("verilog", "switch"): [["verilog", "switch", "--ports", "4"]],
    ("verilog", "crossbar"): [["verilog", "crossbar", "--ports", "4"]],
    ("route",): [["route", "--ports", "8", "--flow", "0>1"],
                 ["route", "--ports", "8", "--collective", "reduce", "--group", "0-3", "--root", "2"],
                 ["route", "--study", "--ports", "8", "--samples", "1"]],
    ("sim", "cell"): [["sim", "cell", "r"], ["sim", "cell", "rd"]],
    ("sim", "faults"): [["sim", "faults", "--packets", "4"],
                        ["sim", "faults", "--ports", "8", "--rate", "0", "--json"]],
    ("characterize",): [["characterize", "-o", "{d}/c.json"]],
    ("timing",): [["timing", "-o", "{d}/t.json"], ["timing", "--no-fpga", "--json", "-o", "{d}/t.json"]],
    ("collective",): [["collective", "--size", "1MiB"],
                      ["collective", "--op", "reduce", "--size", "64KiB", "--fabric", "fred-d"],
                      ["collective", "--network", "{d}/ring4.yml", "--size", "1MiB"],
                      ["collective", "--network", "{d}/ring4.yml", "--chakra", "{d}/chakra4"]],
    ("estimate",): [["estimate", "-w", "resnet-152", "-f", "mesh"],
                    ["estimate", "--trace", "{d}/mlp.txt", "-f", "mesh"]],
    ("sweep",): [["sweep", "-w", "resnet-152", "--workers", "0"]],
    ("scan",): [["scan", "--workers", "0"]],
    ("infer",): [["infer", "-f", "mesh", "--prompt-tokens", "64", "--output-tokens", "8"]],
    ("compare",): [["compare"], ["compare", "--no-sim"]],
}

#: valid values of options whose type does not tell them (the first: a non-default one)
KNOWN = {
    "--dtype": ["fp32", "int32", "bf16", "FP16"], "--dtypes": ["fp16", "int32,fp32"],
    "--fabric": ["fred-d", "mesh,fred-a", "Fred-B", "all"], "--workload": ["transformer-17b", "resnet152"],
    "--op": ["all-gather", "reduce", "p2p", "io-broadcast"], "--algorithm": ["ring", "direct", "in-switch"],
    "--collective": ["all-reduce", "reduce", "all-to-all"], "--group": ["0-3", "0,2,4", "1-2"],
    "--strategy": ["MP(2)-DP(10)-PP(1)", "MP(4)-DP(5)"], "--npu": ["b200", "H100"],
    "--memory": ["none", "recompute", "selective+offload"], "--flow": ["0>1", "0-3>4", "0,1>2,3"],
    "--name": ["top", "a_b1"], "--scheduler": ["tcp://127.0.0.1:1"], "--trace-header": ["DATA", "MODEL"],
    "--chiplets": ["12", "10,4"], "--ports": ["4", "4,8"], "--in-network-dims": ["0"],
    "--samples": ["8", "8,16"], "--timing": ["default", "{d}/timing.json"], "--network": ["{d}/ring4.yml"],
    "--bit-error-rate": ["1e-7"],
    "--wafers": ["4"],    # 1 (its bound) is the default: given explicitly it changes nothing, as it should   # within the embedded default's goodput curve (0 = the default)
    "--chakra": ["{d}/chakra4"], "--trace": ["{d}/mlp.txt"], "--plot": ["{d}/p.png", "{d}/p.svg"],
    "--output": ["{d}/o.v", "{d}/sub/o.json"], "--faults": ["corrupt", "drop,delay"],
    "--phases": ["reduce", "all-reduce,unicast"], "--off-wafer": ["ndr-sharp", "ring"],
    "--all-to-all-method": ["online", "precompiled"],   # refused while the timing file has no all_to_all section
}

#: values no option takes well, and a few that some take
NASTY = ["", " ", "\t", "\n", "-", "--", "0", "-0", "-1", "1", "2", "3", "7", "1e400", "-1e400", "1e-400",
         "5e-324", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e308", "9" * 30, "9" * 5000, "0x10", "0b1",
         "1_000", "\uff11\uff12", "\u0663", "1,5", "1.5", "2.5", "0.5", "1e3", "+5", " 7 ", "7\n", "caf\u00e9",
         "\U0001f4a5", "a\nb", "\udcff", "null", "None", "true", "[]", "{}", "'", '"', "%s", "%(x)s", "{}{}",
         "..", ".", "/", "/dev/null", "/dev/zero", "/dev/full", "/proc/self/status", "{d}", "{d}/missing/x",
         "{d}/fifo", "{d}/notes.txt/x", "x" * 300, "a" * 10000, "-x", "--json"]

#: words of a refusal that name an option as well as its name does (a model's own wording)
SYNONYMS = {"--hbm-gb": ["in HBM ("], "--op": ["collective"], "--dtype": ["element type"],
            "--timing": ["timing file"]}

#: option strings of the file-reading options (their values are paths)
PATH_OPTIONS = {"--network", "--chakra", "--trace", "--timing", "--output", "--plot"}


def _parsers():
    """(command path, parser) of every command and target."""
    from fred.cli import COMMANDS, build_parser

    for name in COMMANDS:
        p = build_parser(only=name)
        sub = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)][0].choices[name]
        targets = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        if targets:
            for t, q in targets[0].choices.items():
                yield (name, t), q
        else:
            yield (name,), sub


def options():
    """(command path, action) of every optional argument (help excluded)."""
    for path, p in _parsers():
        for a in p._actions:
            if a.option_strings and not isinstance(a, argparse._HelpAction):
                yield path, a


def _long(a) -> str:
    return max(a.option_strings, key=len)


def _kind(a) -> str:
    if a.nargs == 0:
        return "flag"
    if a.choices is not None:
        return "choices"
    if getattr(a, "item", None) is not None:
        return "list:" + getattr(a.item, "__name__", "str")
    return getattr(a.type, "__name__", "str") if a.type is not None else "str"


def _typ(a):
    return getattr(a, "item", None) or a.type


def _bound_values(a) -> list:
    t = _typ(a)
    low, high = getattr(t, "low", None), getattr(t, "high", None)
    out = []
    for v in (low, high):
        if v is None:
            continue
        if isinstance(v, int) and not isinstance(v, bool):
            out += [str(v), str(v - 1), str(v + 1)]
        else:
            out += [repr(float(v)), f"{v * (1 - 1e-9):.17g}", f"{v * (1 + 1e-9):.17g}"]
    if high is None and _kind(a).endswith("integer"):
        out += [str(2**31), str(2**63), str(10**19)]
    return out


def must_fail(a, text: str) -> bool | None:
    """True when ``text`` is certainly a bad value of option ``a`` (None: not known)."""
    t = _typ(a)
    kind = getattr(t, "__name__", "")
    s = text.strip()
    if not s:
        return True
    if "\n" in text.strip() and kind in ("integer", "number", "size"):
        return True
    low, high = getattr(t, "low", None), getattr(t, "high", None)
    items = [x.strip() for x in s.split(",")] if _kind(a).startswith("list") else [s]
    for it in items:
        if kind == "integer":
            try:
                v = int(it, 10) if it.lstrip("+-").isascii() and it.lstrip("+-").isdigit() else None
            except ValueError:
                v = None
            if v is None:
                return True
            if (low is not None and v < low) or (high is not None and v > high):
                return True
        elif kind == "number":
            try:
                v = float(it)
            except ValueError:
                return True
            if not math.isfinite(v):
                return True
            if high is not None and v > high:
                return True
            if low is not None and (v < low or (getattr(t, "low_open", False) and v == low)):
                return True
        elif kind == "size":
            if it.lower() in ("nan", "inf", "-inf", "infinity", "0") or it.startswith("-"):
                return True
    return None


def _value_forms(text: str) -> list:
    s = text.strip()
    forms = [s, repr(text), repr(s)]
    try:
        f = float(s)
        forms += [repr(f), f"{f:g}"]
        if math.isfinite(f) and f == int(f):
            forms.append(str(int(f)))
    except (ValueError, OverflowError):
        pass
    return forms


def _names(a, text: str, opt: str) -> list:
    """What a refusal must name: the option (or its name as a word: "algorithm 'x' needs ..."),
    and the value (or, for a comma list, one of its items)."""
    word = opt.lstrip("-")
    groups = [list(a.option_strings) + [opt, f"{word} ", word.replace("-", " ") + " ", word.replace("-", "_")]
              + SYNONYMS.get(opt, [])]
    s = text.strip()
    if s and len(s) <= 60 and not (s.startswith("-") and not s.lstrip("-")[:1].isdigit()) and "{d}" not in s:
        forms = _value_forms(text)
        if _kind(a).startswith("list") or a.type is None:
            forms += [f for item in s.split(",") for f in _value_forms(item)]
        groups.append(forms)
    return groups


def _without(base, a):
    """``base`` less option ``a`` (and its value) if it holds it."""
    out, skip = [], False
    for w in base:
        if skip:
            skip = False
            continue
        if w in a.option_strings:
            skip = a.nargs != 0
            continue
        out.append(w)
    return out


def _arg(opt, value):
    return [f"{opt}={value}"] if value.startswith("-") else [opt, value]


def option_cases(folder, seed=1, nasty=NASTY) -> list[Case]:
    """Every option x (nasty values + its boundaries + valid values) on its command's bases,
    the option given twice, and every flag."""
    make_files(folder)
    rng = random.Random(seed)
    cases = []
    for path, a in options():
        opt = _long(a)
        bases = BASES[path]
        known = KNOWN.get(opt, [])
        if a.choices is not None:
            known = [str(c) for c in a.choices if c != a.default] + [str(c).upper() for c in a.choices][:1]
        first = [_without(b, a) for b in bases]
        if a.nargs == 0:
            for b in first:
                cases.append(Case(b + [opt, opt], names=[list(a.option_strings)], must_fail=True,
                                  label="flag twice"))
                quiet = opt == "--quiet"  # no progress display: the output is the same, as it should be
                cases.append(Case(b + [opt], reference=None if quiet else b, label="flag"))
                cases.append(Case(b + [f"{opt}=1"], names=[list(a.option_strings)], must_fail=True,
                                  label="flag with a value"))
            continue
        values = list(nasty) + _bound_values(a) + known
        for v in values:
            base = first[0] if v in nasty else rng.choice(first)
            cases.append(Case(base + _arg(opt, v), names=_names(a, v, opt), must_fail=must_fail(a, v),
                              label=f"{opt} value"))
        valid = [v for v in known + _bound_values(a) if not must_fail(a, v)][:2]
        for b in first:  # every mode, a valid value: refused, or it changes the result
            for v in valid[:1]:
                same = a.default is not None and str(a.default) == v  # the default changes nothing
                cases.append(Case(b + _arg(opt, v), reference=None if same else b, names=_names(a, v, opt),
                                  label=f"{opt} mode"))
        if isinstance(a, argparse._StoreAction) and valid:
            v1, v2 = (valid + valid)[:2]
            cases.append(Case(first[0] + _arg(opt, v1) + _arg(opt, v2), names=[list(a.option_strings)],
                              must_fail=True, label="option twice"))
        if len(opt) > 4:  # an abbreviation of the option is taken by argparse
            cases.append(Case(first[0] + _arg(opt[:-1], (valid or ["1"])[0]), label="abbreviation"))
    cases += _env_cases()
    cases += _word_cases()
    return cases


def _env_cases() -> list[Case]:
    out = []
    for v in ["", " ", "-1", "abc", "1e3", "0x100000000", "9" * 5000, "\udcff", "1.5", "4294967296"]:
        for base in (["sim", "cell", "r"], ["characterize", "-o", "{d}/c.json"]):
            must = None if not v.strip() else True
            out.append(Case(base, env={"FRED_SEED": v}, names=[["FRED_SEED"]], must_fail=must, label="FRED_SEED"))
    return out


def _word_cases() -> list[Case]:
    """Words where a command or target is expected, and odd argument shapes."""
    words = ["", "-", "--", "x", "VERILOG", "verilog\n", "--help=1", "-h=1", "\udcff", "route=1"]
    out = [Case([w], must_fail=w != "", label="command word") for w in words]
    out += [Case(["verilog", w], must_fail=True, label="target word") for w in words]
    out += [Case(["sim", "cell", w], must_fail=True, label="sim kind") for w in ["R", "", "rdx", "d,r"]]
    out += [Case(["collective", "--size", "1MiB", "--", "x"], must_fail=True, label="after --"),
            Case(["route", "--ports", "8", "--flow", "0>1", "extra"], must_fail=True, label="extra word"),
            Case(["estimate", "-wresnet-152", "-fmesh", "-fmesh"], must_fail=True, label="joined short")]
    return out


TORUS = "topology: [ Ring, Ring ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 100, 50 ]\nlatency: [ 500, 500 ]\n"


def make_files(folder) -> None:
    """The files every base and nasty value names ({d}/...)."""
    from fred.contract.timing import default_timing_path

    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(HERE, "data", "chakra-et", "ring4.yml"), os.path.join(folder, "ring4.yml"))
    with open(os.path.join(folder, "torus.yml"), "w") as fh:
        fh.write(TORUS)
    dst = os.path.join(folder, "chakra4")
    if not os.path.isdir(dst):
        shutil.copytree(os.path.join(HERE, "data", "chakra-et", "all_reduce_4npus_1MB"), dst)
    mlp = os.path.join(SHARED, "workloads", "astra-sim", "MLP_ModelParallel.txt")
    if os.path.exists(mlp):
        shutil.copy(mlp, os.path.join(folder, "mlp.txt"))
    else:  # a 2-layer MODEL trace of the same form
        with open(os.path.join(folder, "mlp.txt"), "w") as fh:
            fh.write("MODEL\n2\n" + "".join(f"l{i} -1 1000 ALLGATHER 4096 1000 ALLREDUCE 4096 500 NONE 0 10\n"
                                            for i in range(2)))
    shutil.copy(default_timing_path(), os.path.join(folder, "timing.json"))
    with open(os.path.join(folder, "notes.txt"), "w") as fh:
        fh.write("a regular file\n")
    fifo = os.path.join(folder, "fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
