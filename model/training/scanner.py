"""Compute-regime scan: training speedup of each fabric over the mesh as the NPU gets faster.

The paper states no NPU speed, so no single NPU figure is "the" answer; this module computes the
curve. The NPU is the default one (:func:`fred.model.workload.compute.default_npu`, the same that
``fred estimate`` uses) with its peak FLOP/s and HBM bandwidth both multiplied by ``k``; its HBM
capacity is unchanged. Every layer runs at its roofline and the optimizer step is HBM-bound, so
every compute task of the iteration (recomputation included) is exactly ``k`` times shorter, while
the network, the switch timing and the schedule stay the same. The memory policy (what makes a
configuration fit in HBM, :mod:`fred.model.workload.memory`) is chosen per point as ``fred estimate``
chooses it; activation offload runs through the I/O controllers and does not scale with k.

For each workload x fabric x k x samples per DP replica, :func:`scan` runs one
:func:`fred.model.training.estimator.estimate` (the mesh always included as the reference) and reports
iteration time, compute and exposed communication by kind and the speedup over the mesh. Then:

* **paper cells** -- for each of the paper's eight headline cells (:data:`PAPER_SPEEDUPS`,
  FRED-SPEC §7: Fred-C / Fred-D x four workloads) the smallest k at which the speedup lies within
  +-:data:`PAPER_BAND` of the paper's value. Found on the scan grid, then refined by bisection in
  log k between the last grid point outside the band and the first one inside it (or across the
  band, when the speedup jumps over it between two grid points) until the bracket is narrower
  than :data:`REFINE_RTOL`; or "not reached", with the largest speedup met and its k;
* **crossover** -- for every FRED variant, the smallest grid k from which on it saves at least
  10% and 25% of the mesh's iteration time (:data:`SAVINGS`), and the last grid k of that run
  (grid resolution, no refinement).

The jobs are independent; :func:`scan` takes a ``map_fn(fn, jobs, desc=..., label=...)`` to run
them (the CLI passes :meth:`fred.jobs.JobRunner.map`: local worker processes or Dask; the default is a serial loop). A
job is one workload x fabric x samples over the whole grid (:class:`SeriesJob`: in one process
its task graphs are built once and re-timed for every k), then one job per paper cell that still
brackets its band edge runs that cell's whole bisection (:class:`BisectJob`): the cells refine
side by side, each at its own pace, instead of in rounds that wait for the slowest cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fred import FredError
from fred.contract.checks import check_int, check_number

from fred.model.workload import compute as C
from .estimator import FABRIC_ORDER, PAPER_SPEEDUPS, estimate, resolve_fabrics, resolve_workloads
from fred.model.system import default_params

#: default scan range of k (multiples of the default NPU) and number of log-spaced points: from a
#: quarter of an H100 to three orders of magnitude above it (ours; issue 11)
K_MIN, K_MAX, K_POINTS = 0.25, 1000.0, 20
#: the paper's samples per DP replica: minibatch = DP size x 16 (FRED-SPEC §6)
PAPER_SAMPLES_PER_REPLICA = 16.0
#: a paper cell counts as reproduced when the model's speedup is within +-10% of the paper's
PAPER_BAND = 0.10
#: refine the k of a paper cell until the bisection bracket is narrower than 2% of k
REFINE_RTOL = 0.02
#: iteration-time savings over the mesh whose crossover k is reported (1 - T_fabric / T_mesh)
SAVINGS = (0.10, 0.25)
#: the paper's headline cells: workload -> {fabric: speedup} (FRED-SPEC §7, paper Fig. 10)
PAPER_CELLS = PAPER_SPEEDUPS


def k_grid(k_min: float = K_MIN, k_max: float = K_MAX, points: int = K_POINTS) -> list[float]:
    """``points`` values of k, log-spaced from ``k_min`` to ``k_max`` inclusive."""
    k_min = check_number("--k-min", k_min, low=0, low_open=True)
    k_max = check_number("--k-max", k_max, low=k_min, low_open=points > 1,
                         why="the range must grow from --k-min")
    points = check_int("--points", points, low=1, high=10_000)
    if points == 1:
        return [k_min]
    r = math.log(k_max / k_min)
    return [k_min * math.exp(r * i / (points - 1)) for i in range(points)]


def scaled_npu(npu: C.NpuParams, k: float) -> C.NpuParams:
    """``npu`` with peak FLOP/s and HBM bandwidth multiplied by ``k`` (capacity unchanged)."""
    k = check_number("k", k, low=0, low_open=True)
    return npu.replace(peak_flops=npu.peak_flops * k, hbm_bw=npu.hbm_bw * k)


@dataclass(frozen=True)
class ScanJob:
    """One estimate of the scan: picklable, so that it can run on a worker process."""
    workload: str
    fabric: str
    k: float
    samples: float
    params: object = None
    npu: object = None               # the NPU at k = 1
    options: tuple = ()              # further estimate() keywords, as sorted (name, value) pairs

    def label(self) -> str:
        return f"{self.workload} on {self.fabric} at k = {self.k:.4g}, {self.samples:g} samples per replica"


@dataclass
class Point:
    """Result of one :class:`ScanJob` (times in seconds); ``error`` when it cannot run."""
    workload: str
    fabric: str
    k: float
    samples: float
    iteration_time: float | None = None
    compute_time: float | None = None
    exposed: dict = field(default_factory=dict)
    strategy: str = ""
    memory_policy: str = ""          # what made it fit in HBM (fred.model.workload.memory), chosen per point
    timing_source: str = ""
    notes: list = field(default_factory=list)
    error: str | None = None
    speedup: float | None = None     # mesh / this fabric at the same k and samples

    @property
    def exposed_comm(self) -> float:
        return sum(self.exposed.values())


def run_point(job: ScanJob) -> Point:
    """Run one scan job (the function the workers execute). A configuration that does not fit
    (a :class:`FredError` from the model) becomes a Point with ``error``; anything else raises."""
    npu = scaled_npu(job.npu or C.default_npu(), job.k)
    p = Point(job.workload, job.fabric, job.k, job.samples)
    try:
        e = estimate(job.workload, job.fabric, params=job.params, npu=npu, samples_per_replica=job.samples,
                     **dict(job.options))
    except FredError as exc:
        p.error = str(exc)
        return p
    p.iteration_time, p.compute_time, p.exposed = e.iteration_time, e.compute_time, dict(e.exposed)
    p.strategy, p.timing_source, p.notes = e.strategy, e.timing_source, list(e.notes)
    p.memory_policy = str(getattr(e, "memory_policy", "") or "")
    return p


@dataclass(frozen=True)
class SeriesJob:
    """The scan's unit of work on a worker: one workload x fabric x samples at several k, in one
    process, so that its task graphs are built once and re-timed for each k
    (:mod:`fred.model.schedule.tape`)."""
    points: tuple                    # ScanJobs, one per k

    def label(self) -> str:
        j = self.points[0]
        return (f"{j.workload} on {j.fabric} at {len(self.points)} k value{'s' if len(self.points) != 1 else ''}, "
                f"{j.samples:g} samples per replica")


def run_series(job: SeriesJob) -> list:
    """Run the scan jobs of a series (the function the workers execute); one Point each."""
    return [run_point(j) for j in job.points]


@dataclass(frozen=True)
class BisectJob:
    """The bisection of one paper cell, all its steps in one process (the cells' bisections run
    side by side, each at its own pace, rather than in rounds)."""
    cell: object                     # PaperCell with its bracket
    params: object = None
    npu: object = None
    options: tuple = ()

    def label(self) -> str:
        c = self.cell
        return f"bisection of {c.workload} on {c.fabric}, {c.samples:g} samples per replica"


def run_bisection(job: BisectJob, point=None) -> "PaperCell":
    """Refine the cell of ``job`` (see :func:`_bisect`); ``point(ScanJob) -> Point`` evaluates
    one estimate (default :func:`run_point`). Returns the refined cell."""
    point = point or run_point
    c = job.cell

    def speedup_at(k):
        mesh, fab = (point(ScanJob(c.workload, f, k, c.samples, job.params, job.npu, job.options))
                     for f in ("mesh", c.fabric))
        return _speedup(mesh, fab)

    _bisect(c, speedup_at)
    return c


def serial_map(fn, jobs, desc="jobs", label=None):
    """The default ``map_fn``: run the jobs one after another in this process."""
    return [fn(j) for j in jobs]


# ---- paper cells -------------------------------------------------------------------------------

def band_status(speedup: float | None, paper: float, band: float = PAPER_BAND) -> str:
    """'below', 'in' or 'above' the +-band around ``paper`` ('none' without a speedup)."""
    if speedup is None:
        return "none"
    if speedup < paper * (1 - band):
        return "below"
    if speedup > paper * (1 + band):
        return "above"
    return "in"


@dataclass
class PaperCell:
    workload: str
    fabric: str
    samples: float
    paper_speedup: float
    reached: bool = False
    k: float | None = None            # smallest k found inside the band
    speedup_at_k: float | None = None
    found_by: str = ""                # "grid", "bisection" or "grid (lowest k scanned)"
    bracket: tuple | None = None      # (k outside, k inside) after refinement
    max_speedup: float | None = None
    k_at_max: float | None = None
    evaluated: list = field(default_factory=list)   # bisection points: (k, speedup)
    # refinement state
    _lo: float | None = None
    _hi: float | None = None
    _lo_status: str = ""
    _todo: bool = False

    @property
    def band(self) -> tuple:
        return (self.paper_speedup * (1 - PAPER_BAND), self.paper_speedup * (1 + PAPER_BAND))


def _start_cell(cell: PaperCell, ks, speedups):
    """Place the cell on the grid: the first grid point inside the band, and the bracket to
    bisect -- between that point and the one before it, or, if the speedup jumps over the whole
    band between two grid points before that, between those two."""
    st = [band_status(s, cell.paper_speedup) for s in speedups]
    out = ("below", "above")
    i_in = next((i for i, s in enumerate(st) if s == "in"), None)
    i_x = next((i for i in range(1, len(st)) if st[i] in out and st[i - 1] in out and st[i] != st[i - 1]), None)
    if i_in is not None:
        cell.reached, cell.k, cell.speedup_at_k = True, ks[i_in], speedups[i_in]
        cell.found_by = "grid" if i_in else "grid (lowest k scanned)"
        if i_in and st[i_in - 1] in out:
            cell._lo, cell._hi, cell._lo_status, cell._todo = ks[i_in - 1], ks[i_in], st[i_in - 1], True
    if i_x is not None and (i_in is None or i_x < i_in):
        cell._lo, cell._hi, cell._lo_status, cell._todo = ks[i_x - 1], ks[i_x], st[i_x - 1], True


def _bisect(cell: PaperCell, speedup_at):
    """Bisect the bracket of ``cell`` in log k until it is narrower than :data:`REFINE_RTOL`:
    ``speedup_at(k)`` gives the speedup at the mid k; a mid inside the band moves the upper end
    (the smallest k inside is wanted), one on the lower end's side of the band the lower end."""
    while cell._todo:
        if not cell._hi / cell._lo > 1 + REFINE_RTOL:
            cell._todo = False
            cell.bracket = (cell._lo, cell._hi)
            break
        m = math.sqrt(cell._lo * cell._hi)
        sp = speedup_at(m)
        cell.evaluated.append((m, sp))
        s = band_status(sp, cell.paper_speedup)
        if s == "in":
            cell.reached, cell.k, cell.speedup_at_k, cell.found_by = True, m, sp, "bisection"
            cell._hi = m
        elif s == cell._lo_status:
            cell._lo = m
        elif s == "none":
            cell._todo = False
            cell.bracket = (cell._lo, cell._hi)
        else:
            cell._hi = m


def _speedup(mesh: Point, fab: Point) -> float | None:
    if mesh.iteration_time is None or fab.iteration_time is None or not fab.iteration_time > 0:
        return None
    return mesh.iteration_time / fab.iteration_time


# ---- crossover ---------------------------------------------------------------------------------

@dataclass
class Crossover:
    workload: str
    fabric: str
    samples: float
    saving: float                       # threshold: 1 - T_fabric / T_mesh
    k_from: float | None = None         # first grid k with at least this saving
    k_until: float | None = None        # last grid k of the run that starts there
    holds_to_k_max: bool = False        # the run reaches the largest k scanned
    max_saving: float | None = None
    k_at_max: float | None = None


def crossover(workload, fabric, samples, saving, ks, speedups) -> Crossover:
    """The grid k range over which ``fabric`` saves at least ``saving`` of the mesh's time."""
    x = Crossover(workload, fabric, samples, saving)
    sv = [None if s is None else 1 - 1 / s for s in speedups]
    known = [(k, v) for k, v in zip(ks, sv) if v is not None]
    if known:
        x.k_at_max, x.max_saving = max(known, key=lambda kv: (kv[1], -kv[0]))
    for i, v in enumerate(sv):
        if v is not None and v >= saving:
            x.k_from = ks[i]
            j = i
            while j + 1 < len(ks) and sv[j + 1] is not None and sv[j + 1] >= saving:
                j += 1
            x.k_until, x.holds_to_k_max = ks[j], j == len(ks) - 1
            break
    return x


# ---- the scan ----------------------------------------------------------------------------------

@dataclass
class ScanResult:
    workloads: list
    fabrics: list                      # as scanned, mesh first
    k_values: list
    samples: list
    npu: C.NpuParams
    points: dict                       # (workload, fabric, k, samples) -> Point, grid points only
    paper_cells: list
    crossovers: list
    timing_source: str = ""
    refine: bool = True
    estimates: int = 0                 # estimates run: the grid's and the bisections' (mesh and fabric)

    def series(self, workload, fabric, samples):
        """(k values, speedups, points) on the grid for one workload x fabric x samples."""
        pts = [self.points[(workload, fabric, k, samples)] for k in self.k_values]
        return list(self.k_values), [p.speedup for p in pts], pts

    def errors(self) -> dict:
        """(workload, samples) -> the error of a configuration that does not fit."""
        out = {}
        for (w, f, k, s), p in self.points.items():
            if p.error and (w, s) not in out:
                out[(w, s)] = p.error
        return out


def scan(workloads=None, fabrics=None, k_values=None, samples=(PAPER_SAMPLES_PER_REPLICA,), *, params=None,
         npu=None, options=None, refine=True, map_fn=None) -> ScanResult:
    """Run the scan (see the module docstring). ``options``: further ``estimate`` keywords
    applied to every point alike (microbatches, mode, granularity, stream_steps)."""
    wl = resolve_workloads(workloads)
    fl = resolve_fabrics(fabrics)
    fl = ["mesh"] + [f for f in fl if f != "mesh"]
    fl = sorted(fl, key=lambda f: FABRIC_ORDER.index(f) if f in FABRIC_ORDER else len(FABRIC_ORDER))
    ks = list(k_values) if k_values is not None else k_grid()
    if not ks:
        raise FredError("the scan needs at least one k")
    ks = [check_number("k", k, low=0, low_open=True) for k in ks]
    if sorted(set(ks)) != ks:
        raise FredError(f"k values must be strictly increasing, got {ks}")
    samples = [check_number("--samples", s, low=0, low_open=True) for s in samples]
    if len(set(samples)) != len(samples):
        raise FredError(f"samples per replica listed twice: {samples}")
    params = params or default_params()
    npu = npu or C.default_npu()
    opts = tuple(sorted((options or {}).items()))
    map_fn = map_fn or serial_map

    # one job per workload x fabric x samples over all k (its graphs built once, re-timed per k)
    series = [SeriesJob(tuple(ScanJob(w, f, k, s, params, npu, opts) for k in ks))
              for w in wl for s in samples for f in fl]
    runs = map_fn(run_series, series, desc="fred scan", label=SeriesJob.label)
    got = {(j.workload, j.fabric, j.k, j.samples): p for sj, pts in zip(series, runs) for j, p in zip(sj.points, pts)}
    keys = [(w, f, k, s) for w in wl for s in samples for k in ks for f in fl]
    points = {key: got[key] for key in keys}
    for (w, f, k, s), p in points.items():
        p.speedup = _speedup(points[(w, "mesh", k, s)], p)
    grid = dict(points)

    cells = []
    for w in wl:
        for f in fl:
            paper = PAPER_CELLS.get(w, {}).get(f)
            if paper is None:
                continue
            for s in samples:
                c = PaperCell(w, f, s, paper)
                sp = [grid[(w, f, k, s)].speedup for k in ks]
                _start_cell(c, ks, sp)
                known = [(k, v) for k, v in zip(ks, sp) if v is not None]
                if known:
                    c.k_at_max, c.max_speedup = max(known, key=lambda kv: (kv[1], -kv[0]))
                if not refine:
                    c._todo = False
                cells.append(c)
    # one job per cell still bracketing: its whole bisection (cells side by side, not in rounds)
    todo = [i for i, c in enumerate(cells) if c._todo]
    if refine and todo:
        done = map_fn(run_bisection, [BisectJob(cells[i], params, npu, opts) for i in todo],
                      desc="fred scan bisection", label=BisectJob.label)
        for i, c in zip(todo, done):
            cells[i] = c
    for c in cells:
        if c.evaluated and c.reached:
            c.found_by = "bisection"          # the band's lower edge located to REFINE_RTOL
        for k, v in c.evaluated:
            if v is not None and (c.max_speedup is None or v > c.max_speedup):
                c.max_speedup, c.k_at_max = v, k

    xs = [crossover(w, f, s, sv, ks, [grid[(w, f, k, s)].speedup for k in ks])
          for w in wl for s in samples for f in fl if f != "mesh" for sv in SAVINGS]
    source = next((p.timing_source for p in grid.values() if p.timing_source), params.switch.source)
    return ScanResult(wl, fl, ks, samples, npu, grid, cells, xs, source, refine,
                      estimates=len(keys) + 2 * sum(len(c.evaluated) for c in cells))


# ---- JSON --------------------------------------------------------------------------------------

#: rounding of the JSON output (stated in the document itself)
ROUNDING = {"*_s": "4 significant digits", "k*": "4 significant digits",
            "speedup*, saving*": "4 decimal places"}
SCHEMA_VERSION = 2


def _sig(x, n=4):
    return None if x is None else float(f"{x:.{n}g}")


def _dec(x, n=4):
    return None if x is None else round(x, n)


def to_json(r: ScanResult) -> dict:
    """One JSON-ready object (``kind`` "fred-scan", ``schema_version`` 1; units in key names; the
    points in ``results``, like every command's JSON)."""
    pts = []
    for (w, f, k, s), p in r.points.items():
        d = {"workload": w, "fabric": f, "k": _sig(k), "samples_per_replica": s}
        if p.error:
            d["error"] = p.error
        else:
            d.update(iteration_time_s=_sig(p.iteration_time), compute_time_s=_sig(p.compute_time),
                     exposed_s={kind: _sig(v) for kind, v in sorted(p.exposed.items())},
                     exposed_total_s=_sig(p.exposed_comm), speedup_vs_mesh=_dec(p.speedup),
                     memory_policy=p.memory_policy or None)
        pts.append(d)
    cells = [{"workload": c.workload, "fabric": c.fabric, "samples_per_replica": c.samples,
              "paper_speedup": c.paper_speedup, "band": [_dec(b) for b in c.band], "reached": c.reached,
              "k": _sig(c.k), "speedup_at_k": _dec(c.speedup_at_k), "found_by": c.found_by or None,
              "bracket_k": [_sig(b) for b in c.bracket] if c.bracket else None,
              "max_speedup": _dec(c.max_speedup), "k_at_max": _sig(c.k_at_max),
              "bisection": [{"k": _sig(k), "speedup": _dec(v)} for k, v in c.evaluated]} for c in r.paper_cells]
    xs = [{"workload": x.workload, "fabric": x.fabric, "samples_per_replica": x.samples, "saving": x.saving,
           "k_from": _sig(x.k_from), "k_until": _sig(x.k_until), "holds_to_k_max": x.holds_to_k_max,
           "max_saving": _dec(x.max_saving), "k_at_max_saving": _sig(x.k_at_max)} for x in r.crossovers]
    n = r.npu
    return {"kind": "fred-scan", "schema_version": SCHEMA_VERSION, "rounding": ROUNDING,
            "switch_timing_source": r.timing_source,
            "npu_at_k1": {"peak_flops_per_s": n.peak_flops, "utilisation": n.utilisation, "hbm_bandwidth_Bps": n.hbm_bw,
                          "hbm_capacity_bytes": n.hbm_capacity, "source": n.source},
            "k_scales": "peak FLOP/s and HBM bandwidth of the NPU at k = 1 (HBM capacity unchanged)",
            "paper_band": PAPER_BAND, "refine_rtol": REFINE_RTOL if r.refine else None,
            "workloads": r.workloads, "fabrics": r.fabrics, "k_values": [_sig(k) for k in r.k_values],
            "samples_per_replica": r.samples, "paper_cells": cells, "crossover": xs,
            "results": pts}  # one result per workload x fabric x k x samples (README: JSON output)
