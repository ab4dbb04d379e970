"""Verilog generation at the chiplets' real width (``make bench``, ``python -m fred.bench verilog``).

Runs ``fred verilog`` (a fresh interpreter each, as a user would) for the targets of issue 17,
each in the hierarchical form (``--form auto`` picks it above 16 lanes), and reports wall time,
the child's CPU time (user + system; the machine is shared, so CPU time is the fairer figure),
peak memory, the Verilog size and its number of modules, and lints the output
(:func:`fred.sim.lint.lint_modules`: ``verilator --lint-only -Wall`` with the project's waivers on
each distinct module, its children as port-only stubs; a whole wide chiplet does not fit Verilator's
lint in memory). Target: each under a minute on one core, lint clean. For comparison it also times FRED_3(12) at 16 lanes in the shared form (one module per
cell kind, every lane of every adder its own module), the widest the old form was run at.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: label -> fred verilog arguments
TARGETS = {
    "FRED_3(12), 256 fp16 lanes": ["fabric", "--ports", "12", "--middle", "3", "--lanes", "256"],
    "FRED_3(12), 320 fp16 lanes": ["fabric", "--ports", "12", "--middle", "3", "--lanes", "320"],
    "FRED_3(10), 256 fp16 lanes": ["fabric", "--ports", "10", "--middle", "3", "--lanes", "256"],
    "FRED_3(10), 320 fp16 lanes": ["fabric", "--ports", "10", "--middle", "3", "--lanes", "320"],
    "12-port switch, 256 fp16 lanes": ["switch", "--ports", "12", "--middle", "3", "--lanes", "256"],
    "FRED_3(12), 16 lanes, shared form": ["fabric", "--ports", "12", "--middle", "3", "--lanes", "16",
                                          "--form", "shared"],
}


def top_module(text: str) -> str:
    """The module of ``text`` that no other module instantiates."""
    from fred.hdl.physical import module_tree

    bodies, children = module_tree(text)
    used = {c for ch in children.values() for c in ch}
    tops = [m for m in bodies if m not in used]
    if len(tops) != 1:
        raise ValueError(f"expected one top module, found {tops}")
    return tops[0]


def time_verilog(argv, lint=True) -> dict:
    """Run ``fred verilog ARGV -o FILE``; wall and CPU seconds, peak MB, bytes and modules, and
    (``lint``) the modules with lint messages (``{}``: lint clean)."""
    with tempfile.TemporaryDirectory(prefix="fred-bench-verilog-") as tmp:
        out = Path(tmp) / "out.v"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fred", "verilog", *argv, "-q", "-o", str(out)],
                       check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        text = out.read_text()
    lint_found = None
    if lint:
        from fred.sim.lint import lint_modules

        lint_found = lint_modules(text, top_module(text))
    return {"lint": lint_found, "wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "peak_mb": after.ru_maxrss / 1024, "bytes": len(text),
            "modules": len(re.findall(r"^module\s", text, re.M))}


def main() -> None:
    print(f"{'target':36s} {'wall s':>7s} {'cpu s':>7s} {'peak MB':>8s} {'Verilog MB':>11s} {'modules':>8s}  lint")
    for label, argv in TARGETS.items():
        r = time_verilog(argv)
        lint = "clean" if not r["lint"] else f"{sum(map(len, r['lint'].values()))} messages in {', '.join(r['lint'])}"
        print(f"{label:36s} {r['wall']:7.1f} {r['cpu']:7.1f} {r['peak_mb']:8.0f} "
              f"{r['bytes'] / 1e6:11.2f} {r['modules']:8d}  {lint}", flush=True)


if __name__ == "__main__":
    main()
