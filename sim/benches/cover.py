"""Functional coverage of the benches (cocotb-coverage), and its report.

Every cover point is a :class:`cocotb_coverage.coverage.CoverPoint` with explicit bins, defined
here so that every bench's export lists every bin (an unsampled bin shows up with 0 hits):

* ``fred.cell.mode_class_stall`` -- cell kind x route kind x operand class x stall pattern:
  cell ``R`` / ``D`` / ``RD``; route ``pass`` (one input to one output), ``broadcast`` (one input
  to both outputs: D and RD) or ``sum`` (in0 + in1: R and RD); operand class of every element
  carried (``zero``, ``subnormal``, ``normal``, ``max`` = largest finite magnitude, ``inf``,
  ``nan``) and, for sums, ``tie`` (the exact sum lies half-way between two neighbours: the
  round-to-nearest-even case); stall pattern = the bench's (source idle, sink stall)
  probabilities (:data:`STALLS`, the cell bench's default pauses). Float types only.
* ``fred.fabric.kind_ports_middle`` -- flow kind of a phase (``unicast``, ``multicast``,
  ``reduce``, ``all-reduce`` when every flow of the phase has that kind, ``mixed`` when the
  phase runs flows of several kinds concurrently) x (P, m) of :data:`FABRIC_CASES`.
* ``fred.switch.round_vc`` -- the VC of every round start (MP, PP, DP);
  ``fred.switch.transition`` -- consecutive round starts: (VC before, VC after, ``same`` phase
  or ``new`` phase); ``fred.switch.preemption`` -- a round of a higher-priority VC starts while
  the phase that ran the previous round (a lower VC) is still ready: (preempted VC, preempting
  VC); ``fred.switch.ctrl_fanout`` -- every ACK / NACK the switch forwards: (kind, number of
  outputs it was copied to), fan-outs 1..5 (the 4- and 5-port benches' flows).

A hit is one sample: cells sample each (route, class, stall) combination present in a phase once
per phase, the fabric one per phase, the switch one per round start / transition / forwarded
control packet. Sampling is off unless ``FRED_COVERAGE_DIR`` is set; then each bench writes its
coverage (cocotb-coverage's YAML export) into that folder when it passes (:func:`export`).
:func:`report` merges the exports (cocotb-coverage's ``merge_coverage``), prints one table row
per bin and returns the empty bins; ``make coverage`` (:mod:`fred.sim.coverage`) runs the
benches and fails when a bin stays empty.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import numpy as np
from cocotb_coverage import coverage as cv

from fred.contract import packet as pk
from fred.hdl.dtypes import get_dtype
from fred.sim.golden import from_values, to_values

__all__ = ["enabled", "export", "report", "value_classes", "tie_mask", "sample_cell_phase",
           "sample_fabric_phase", "sample_switch", "STALLS", "FABRIC_CASES", "POINTS"]

ENV = "FRED_COVERAGE_DIR"
CLASSES = ("zero", "subnormal", "normal", "max", "inf", "nan")
#: (source idle, sink stall) patterns: the cell bench's DEFAULT_PAUSES
STALLS = ((0.0, 0.0), (0.5, 0.5), (0.2, 0.9))
ROUTES = {"R": ("pass", "sum"), "D": ("pass", "broadcast"), "RD": ("pass", "broadcast", "sum")}
FLOW_KINDS = ("unicast", "multicast", "reduce", "all-reduce", "mixed")
#: (P, m) of the fabric benches make coverage runs (cases of tests/sim/test_fabric_sim.py's subset)
FABRIC_CASES = ((3, 2), (5, 3), (8, 2))
VCS = tuple(pk.VC_NAMES[v] for v in pk.PRIORITY)          # MP, PP, DP (priority order)
FANOUTS = (1, 2, 3, 4, 5)


def _stall_name(s):
    return f"idle {s[0]:g} / stall {s[1]:g}"


CELL_BINS = [(k, r, c, _stall_name(s)) for k, routes in ROUTES.items() for r in routes
             for c in CLASSES + (("tie",) if r == "sum" else ()) for s in STALLS]
FABRIC_BINS = [(kind, P, m) for kind in FLOW_KINDS for P, m in FABRIC_CASES]
TRANSITION_BINS = [(a, b, how) for a in VCS for b in VCS for how in ("same", "new")
                   if how == "new" or a == b]
PREEMPTION_BINS = [(low, high) for i, high in enumerate(VCS) for low in VCS[i + 1:]]
FANOUT_BINS = [(k, n) for k in ("ACK", "NACK") for n in FANOUTS]


@cv.CoverPoint("fred.cell.mode_class_stall", bins=CELL_BINS)
def _cell(kind, route, cls, stall):
    pass


@cv.CoverPoint("fred.fabric.kind_ports_middle", bins=FABRIC_BINS)
def _fabric(kind, ports, middle):
    pass


@cv.CoverPoint("fred.switch.round_vc", bins=list(VCS))
def _round_vc(vc):
    pass


@cv.CoverPoint("fred.switch.transition", bins=TRANSITION_BINS)
def _transition(before, after, how):
    pass


@cv.CoverPoint("fred.switch.preemption", bins=PREEMPTION_BINS)
def _preemption(low, high):
    pass


@cv.CoverPoint("fred.switch.ctrl_fanout", bins=FANOUT_BINS)
def _fanout(kind, n):
    pass


#: cover point name -> its bins, in report order
POINTS = {"fred.cell.mode_class_stall": CELL_BINS, "fred.fabric.kind_ports_middle": FABRIC_BINS,
          "fred.switch.round_vc": list(VCS), "fred.switch.transition": TRANSITION_BINS,
          "fred.switch.preemption": PREEMPTION_BINS, "fred.switch.ctrl_fanout": FANOUT_BINS}


def enabled() -> bool:
    return bool(os.environ.get(ENV))


# -- classification -------------------------------------------------------------------------
def value_classes(dtype, bits) -> np.ndarray:
    """Class name (of :data:`CLASSES`) of every element of ``bits`` (float types)."""
    t = get_dtype(dtype)
    x = np.asarray(bits, dtype=np.uint64)
    e = (x >> t.man_bits) & t.exp_max
    m = x & ((1 << t.man_bits) - 1)
    mag = x & ((1 << (t.width - 1)) - 1)
    out = np.full(x.shape, "normal", dtype=object)
    out[(e == 0) & (m == 0)] = "zero"
    out[(e == 0) & (m != 0)] = "subnormal"
    out[mag == t.max_finite] = "max"
    out[(e == t.exp_max) & (m == 0)] = "inf"
    out[(e == t.exp_max) & (m != 0)] = "nan"
    return out


def tie_mask(dtype, a_bits, b_bits) -> np.ndarray:
    """True where the exact sum of two finite operands lies exactly half-way between two
    neighbouring values of ``dtype`` (so round-to-nearest-even decides). The float64 sum is
    exact whenever a tie is possible (exponents at most man_bits + 2 apart)."""
    t = get_dtype(dtype)
    with np.errstate(all="ignore"):
        a = to_values(t.name, a_bits).astype(np.float64)
        b = to_values(t.name, b_bits).astype(np.float64)
        s = np.abs(a + b)
    ok = np.isfinite(s)
    sv = np.where(ok, s, 0.0)
    r = from_values(t.name, sv).astype(np.uint64)             # nearest (RNE), as bits
    rv = to_values(t.name, r).astype(np.float64)
    lo = np.where(rv <= sv, r, r - 1)
    lov = to_values(t.name, lo).astype(np.float64)
    hiv = to_values(t.name, lo + 1).astype(np.float64)
    with np.errstate(all="ignore"):
        return ok & (rv != sv) & np.isfinite(hiv) & (sv - lov == hiv - sv)


# -- sampling -------------------------------------------------------------------------------
def sample_cell_phase(kind, dtype, routes, ins, idle, stall):
    """One cell phase that passed: ``routes`` (golden_cells.Route), ``ins`` the driven inputs."""
    if not enabled() or not get_dtype(dtype).is_float:
        return
    name = _stall_name((idle, stall))
    kind = kind.upper()
    for r in routes:
        rk = "sum" if r.is_sum else ("broadcast" if len(r.outputs) > 1 else "pass")
        seen = set()
        for i in r.inputs:
            seen |= set(value_classes(dtype, ins[i]).ravel().tolist())
        if r.is_sum and tie_mask(dtype, ins[r.inputs[0]].ravel(), ins[r.inputs[1]].ravel()).any():
            seen.add("tie")
        for c in sorted(seen):
            _cell(kind, rk, c, name)


def sample_fabric_phase(flows, ports, middle):
    if not enabled():
        return
    kinds = {f.kind for f in flows}
    _fabric(kinds.pop() if len(kinds) == 1 else "mixed", ports, middle)


def sample_switch(rounds, ctrl_packets):
    """``rounds``: [(cycle, vc, phase, ready_vcs bitmask)] of every round start in order;
    ``ctrl_packets``: [(output, Header)] of every control packet delivered."""
    if not enabled():
        return
    prev = None
    for t, vc, phase, ready in rounds:
        name = pk.VC_NAMES[vc]
        _round_vc(name)
        if prev is not None:
            pvc, pphase = prev
            _transition(pk.VC_NAMES[pvc], name, "same" if (pvc, pphase) == (vc, phase) else "new")
            if pvc != vc and pk.PRIORITY.index(vc) < pk.PRIORITY.index(pvc) and ready >> pvc & 1:
                _preemption(pk.VC_NAMES[pvc], name)
        prev = (vc, phase)
    copies = Counter()
    for q, h in ctrl_packets:
        copies[pk.encode_header(h)] += 1
    for word, n in copies.items():
        h = pk.decode_header(word)
        _fanout(pk.KIND_NAMES[h.kind], n)


def export(bench: str) -> Path | None:
    """Write this simulation's coverage (YAML) into ``$FRED_COVERAGE_DIR``; returns the file."""
    if not enabled():
        return None
    d = Path(os.environ[ENV])
    d.mkdir(parents=True, exist_ok=True)
    f = d / f"{bench}-{os.getpid()}-{time.monotonic_ns()}.yml"
    cv.coverage_db.export_to_yaml(str(f))
    return f


# -- report ---------------------------------------------------------------------------------
def report(files, merged: Path) -> tuple[str, list]:
    """Merge coverage exports ``files`` into ``merged`` (YAML); return ``(table, empty)``:
    the table text (one row per bin, hits, and a per-point summary) and the empty bins as
    ``(point, bin)``."""
    import yaml

    files = [str(f) for f in files]
    if not files:
        raise ValueError("no coverage files to report: run the benches with FRED_COVERAGE_DIR set")
    merged.parent.mkdir(parents=True, exist_ok=True)
    cv.merge_coverage(lambda *_: None, str(merged), *files)
    db = yaml.safe_load(merged.read_text())
    lines, empty = [], []
    for point, bins in POINTS.items():
        hits = {str(k): v for k, v in (db.get(point, {}).get("bins:_hits") or {}).items()}
        n_hit = sum(1 for b in bins if hits.get(str(b), 0) > 0)
        lines.append(f"{point}: {n_hit} of {len(bins)} bins hit")
        for b in bins:
            h = hits.get(str(b), 0)
            label = " | ".join(str(x) for x in b) if isinstance(b, tuple) else str(b)
            lines.append(f"  {label:<44} {h:>7}{'   EMPTY' if h == 0 else ''}")
            if h == 0:
                empty.append((point, b))
    total = sum(len(b) for b in POINTS.values())
    lines.append(f"total: {total - len(empty)} of {total} bins hit, {len(empty)} empty")
    return "\n".join(lines), empty
