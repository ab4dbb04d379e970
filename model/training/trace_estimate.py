"""Run an ASTRA-sim 1.x text trace (:mod:`fred.model.inputs.astra_trace`) on the wafer.

>>> from fred.model.training.trace_estimate import estimate_trace, trace_table
>>> e = estimate_trace("Resnet50_DataParallel.txt", "fred-d")        # doctest: +SKIP
>>> e.iteration_time, e.exposed["dp"], e.trace                     # doctest: +SKIP

**Compute** comes from the trace: every forward, input-gradient and weight-gradient entry is one
compute task of ``cycles / clock`` seconds (``clock_ghz``, default 1 GHz; the roofline of
:mod:`fred.model.workload.compute` is not used). **Communication** runs through the flow simulator
(:class:`fred.model.collectives.flowsim.Sim`) on the chosen fabric, as the collectives of
:mod:`fred.model.collectives.api` with each fabric's default algorithm: ALLREDUCE -> all-reduce,
ALLGATHER -> all-gather, REDUCESCATTER -> reduce-scatter, ALLTOALL -> all-to-all, with the
trace's byte counts as the per-NPU buffer (ASTRA-sim's convention, and flowsim's). After every
collective the layer's update delay (last field, cycles) runs before the collective counts as
done (ASTRA-sim 1.x ``Layer.cc``).

**Parallel dimension of each collective** -- ASTRA-sim 1.x ``Workload::decode_involved_dimensions``
and the ``iterate_*`` loops of ``Workload.cc``, with "the network dimensions" of ASTRA-sim mapped
to MP or DP groups of a strategy MP(a)-DP(b)-PP(1) on the wafer's N = 20 NPUs:

====================================  ==================  =================  ==================
kind                                  forward             input gradient     weight gradient
====================================  ==================  =================  ==================
DATA                                  (not issued)        (not issued)       DP, all N NPUs
MODEL                                 MP, all N NPUs      MP, all N NPUs     (not issued)
HYBRID_DATA_MODEL                     MP (inner dim)      MP                 DP
HYBRID_MODEL_DATA                     MP                  MP                 DP (inner dim)
HYBRID_TRANSFORMER[_FWD_IN_BCKWD]     MP                  MP                 DP
HYBRID_DLRM[_ENHANCED]                layer 0: all-to-all over all N NPUs   DP, all N NPUs
====================================  ==================  =================  ==================

The strategy must agree with the trace (else a one-line :class:`fred.FredError`); the default
is derived from the header:

* DATA, HYBRID_DLRM: DP(N). MODEL: MP(N).
* HYBRID_TRANSFORMER[_FWD_IN_BCKWD] with ``model_parallel_NPU_group: k``: MP(k)-DP(N/k) (k must
  divide N; a given strategy must have MP = k). ASTRA-sim puts MP on the innermost network
  dimensions, as the wafer's placement rule does (NPU = mp + a dp, :mod:`.parallel_groups`).
* HYBRID_DATA_MODEL / HYBRID_MODEL_DATA: ASTRA-sim puts MP (resp. DP) on the topology's first
  dimension, whose size the trace does not state. The wafer's first dimension is the 4 NPUs of
  one L1 switch (= one mesh row, ``WaferParams.npus_per_l1``): default MP(4)-DP(5) with MP
  groups on consecutive NPUs, resp. MP(5)-DP(4) with DP groups on consecutive NPUs
  (NPU = dp + b mp). A ``model_parallel_NPU_group: k`` in the header (our extension) or a given
  strategy sets MP instead; the inner dimension stays as the kind says.
* PP must be 1: the format has no pipeline stages.

**Schedule of one iteration** (the order of ASTRA-sim's training loop, one pass):

* MODEL / HYBRID_*: forward layer by layer, each layer's forward collective blocking (the next
  layer waits for it); backward from the last layer: input-gradient compute, its collective
  issued (not for layer 0), weight-gradient compute, its collective issued; the next layer's
  input gradient waits for this layer's weight-gradient compute and input-gradient collective.
  FWD_IN_BCKWD: before the input gradient of a layer listed in ``checkpoint_initiates``, the
  forward (compute and collectives) of the layers from the nearest checkpoint at or below it up
  to the layer before it is recomputed.
* DATA / HYBRID_DLRM: forward compute only; backward from the last layer: weight-gradient
  compute, its collective issued, input-gradient compute (ASTRA-sim computes no input gradient
  for layer 0). DLRM: layer 0's forward all-to-all runs in the background until the last
  bottom-MLP layer's forward, its input-gradient all-to-all is issued after the input gradient
  of the layer above the bottom MLP and waited for at the end (DLRM and DLRM_ENHANCED differ
  only in the next iteration's overlap, which one pass does not show).
* Weight-gradient collectives run one after another on one communication stream (ASTRA-sim
  schedules them FIFO; :mod:`.schedule` does the same for DP buckets) and overlap the rest of
  the backward; the iteration ends when the last one (and its update delay) is done -- in
  ASTRA-sim's steady state the next forward of layer 0 waits for exactly that collective. There
  is no optimizer step, input load or memory check beyond what the trace states.
* On FRED fabrics MP traffic runs on the MP virtual channel and DP traffic on the DP one
  (priorities of :data:`fred.model.system.params.VC_PRIORITY`); DLRM's all-to-alls count as MP.

The breakdown is the critical path of :func:`fred.model.schedule.analysis.analyse` (compute + exposed
MP + exposed DP = iteration time; update delays count towards their collective's kind).
No coarsening: every layer's three compute entries and its collectives are separate tasks.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

from fred import FredError

from fred.model.inputs import Trace, load_trace
from .estimator import resolve_fabrics, speedup_rows
from fred.model.collectives import Sim
from fred.model.collectives import format_strategy, groups, parse_strategy
from fred.model.system import canonical_fabric, default_params
from fred.model.schedule import analyse
from fred.model.schedule import ScheduleGraph
from fred.model.network import build_fabric

DEFAULT_CLOCK_GHZ = 1.0
#: ASTRA-sim comm type -> collective of fred.model.collectives.algorithms.OPS
COMM_OPS = {"ALLREDUCE": "all-reduce", "ALLGATHER": "all-gather", "REDUCESCATTER": "reduce-scatter",
            "ALLTOALL": "all-to-all"}
TRACE_KINDS = ("compute", "mp", "dp")
_DATA_LOOP = ("DATA", "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED")


@dataclass
class TraceEstimate:
    trace: str                  # the trace file (path as given)
    workload: str               # its stem
    kind: str                   # parallelism kind
    header: str                 # the header line used
    header_source: str          # "file" or "given"
    layers: int
    clock_ghz: float
    fabric: str
    strategy: str
    placement: str
    iteration_time: float
    compute_time: float         # compute on the critical path
    compute_busy: float         # all compute of one NPU (incl. recomputation)
    exposed: dict               # "mp"/"dp" -> seconds on the critical path
    comm_busy: dict             # "mp"/"dp" -> union of that kind's task intervals
    timing_source: str
    tasks: int
    sim_seconds: float
    speedup: float | None = None
    notes: list = field(default_factory=list)
    preemptions: int = 0

    @property
    def exposed_comm(self) -> float:
        return sum(self.exposed.values())

    def to_dict(self) -> dict:
        d = asdict(self)
        d["exposed_comm"] = self.exposed_comm
        return d


@dataclass(frozen=True)
class _Plan:
    abc: tuple
    placement: str
    mp: list                    # MP groups (lists of NPU ids)
    dp: list                    # DP groups
    all: list                   # one group of every NPU
    dims: dict                  # phase -> "mp" | "dp" | "all" | None


def _check_clock(clock_ghz) -> float:
    try:
        c = float(clock_ghz)
    except (TypeError, ValueError):
        raise FredError(f"trace clock must be a number of GHz, got {clock_ghz!r}") from None
    if not (math.isfinite(c) and c > 0):
        raise FredError(f"trace clock must be > 0 GHz, got {clock_ghz!r}")
    return c


def resolve_strategy(trace: Trace, strategy=None, params=None) -> tuple[tuple, str]:
    """((a, b, c), placement) for ``trace`` on the wafer: the given strategy checked against the
    trace, or the default derived from its header (see the module docs)."""
    p = params or default_params()
    N, first = p.npus, p.npus_per_l1
    k, kind = trace.header.mp_group, trace.kind
    given = None
    if strategy is not None:
        try:
            given = parse_strategy(strategy, npus=N)
        except ValueError as exc:
            raise FredError(str(exc)) from None
        if given[2] != 1:
            raise FredError(f"{trace.path}: strategy {format_strategy(given)} has PP({given[2]}), but an "
                            "ASTRA-sim text trace has no pipeline stages; use PP(1)")
    inner_dp = kind == "HYBRID_MODEL_DATA"
    placement = "DP inner (NPU = dp + b*mp)" if inner_dp else "MP inner (NPU = mp + a*dp)"

    def need(abc, why):
        if given is not None and given != abc:
            raise FredError(f"{trace.path}: {kind} {why}, so the strategy must be {format_strategy(abc)}, "
                            f"not {format_strategy(given)}")
        return abc

    if kind in _DATA_LOOP:
        return need((1, N, 1), f"communicates over all {N} NPUs as data parallelism"), placement
    if kind == "MODEL":
        return need((N, 1, 1), f"communicates over all {N} NPUs as model parallelism"), placement
    if k is not None:
        if N % k:
            raise FredError(f"{trace.path}: model_parallel_NPU_group: {k} does not divide the wafer's {N} NPUs")
        return need((k, N // k, 1), f"has model_parallel_NPU_group: {k}"), placement
    if given is not None:
        return given, placement
    if kind in ("HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA") and N % first == 0:
        return ((first, N // first, 1) if not inner_dp else (N // first, first, 1)), placement
    raise FredError(f"{trace.path}: {kind} header gives no model_parallel_NPU_group; pass a strategy "
                    f"MP(a)-DP(b) or a header with 'model_parallel_NPU_group: a'")


def _plan(trace, abc, placement, N) -> _Plan:
    a, b, c = abc
    if placement.startswith("DP inner"):
        mp, dp = groups((b, a, 1), "dp"), groups((b, a, 1), "mp")
    else:
        mp, dp = groups(abc, "mp"), groups(abc, "dp")
    kind = trace.kind
    if kind in _DATA_LOOP:
        dims = {"fwd": None, "ig": None, "wg": "dp"}
    elif kind == "MODEL":
        dims = {"fwd": "mp", "ig": "mp", "wg": None}
    else:
        dims = {"fwd": "mp", "ig": "mp", "wg": "dp"}
    return _Plan(abc, placement, mp, dp, [list(range(N))], dims)


def _ignored_notes(trace, plan) -> list:
    notes = []
    dl = trace.kind in ("HYBRID_DLRM", "HYBRID_DLRM_ENHANCED")
    for phase, title in (("fwd", "forward"), ("ig", "input-gradient"), ("wg", "weight-gradient")):
        if plan.dims[phase] is not None:
            continue
        n = sum(1 for i, l in enumerate(trace.layers)
                if l.comm(phase)[0] != "NONE" and l.comm(phase)[1] > 0 and not (dl and i == 0))
        if n:
            notes.append(f"{n} {title} collective(s) of the trace not run: ASTRA-sim issues none in {trace.kind}"
                         + (" except layer 0's" if dl else ""))
    a, b, _ = plan.abc
    for dim, size, title in (("mp", a, "MP"), ("dp", b, "DP")):
        phases = [ph for ph, d in plan.dims.items() if d == dim]
        n = sum(1 for l in trace.layers for ph in phases if l.comm(ph)[0] != "NONE" and l.comm(ph)[1] > 0)
        if size == 1 and n:
            notes.append(f"{n} collective(s) on {title}(1) groups of one NPU: nothing crosses the network")
    for k in trace.header.extra:
        notes.append(f"header key {k!r} ignored")
    return notes


def _build(g, trace: Trace, plan: _Plan, clock_hz: float):
    L = trace.layers
    n = len(L)
    kind = trace.kind
    sec = lambda cycles: float(cycles) / clock_hz

    def comm(phase, i, deps, dim=None):
        """Issue layer i's collective of ``phase`` on its dimension; the update delay follows.
        Returns the task that ends it, or None if nothing is issued."""
        dim = dim or plan.dims[phase]
        typ, nbytes = L[i].comm(phase)
        if dim is None or typ == "NONE" or nbytes <= 0:
            return None
        label = "dp" if dim == "dp" or (dim == "all" and phase == "wg") else "mp"
        grps = {"mp": plan.mp, "dp": plan.dp, "all": plan.all}[dim]
        t = g.coll(COMM_OPS[typ], grps, nbytes, deps, label)
        if t is None or g.kind.get(t) != label:        # a group of one NPU: nothing on the network
            return None
        if L[i].update_cycles:
            t = g._rec(g.sim.delay(sec(L[i].update_cycles), deps=[t], label=label), label, [t])
        return t

    def compute(i, phase, deps):
        return g.compute(sec(L[i].cycles(phase)), deps, label=f"{L[i].name}.{phase}")

    wg_stream = [None]

    def wg_comm(i, deps):
        t = comm("wg", i, list(deps) + [wg_stream[0]])
        if t is not None:
            wg_stream[0] = t

    if kind in _DATA_LOOP:
        dlrm = kind != "DATA"
        last_bottom = trace.header.last_bottom_layer
        a2a_fwd = a2a_ig = None
        prev = None
        for i in range(n):
            prev = compute(i, "fwd", [prev])
            if dlrm and i == 0 and L[0].fwd_comm == "ALLTOALL":
                a2a_fwd = comm("fwd", 0, [prev], dim="all")
            if dlrm and i == last_bottom and a2a_fwd is not None:
                prev = g.join([prev, a2a_fwd])
        for i in reversed(range(n)):
            wg = compute(i, "wg", [prev])
            wg_comm(i, [wg])
            if i == 0:
                prev = g.join([wg, a2a_ig])
                break
            prev = compute(i, "ig", [wg])
            if dlrm and i == last_bottom + 1:
                a2a_ig = comm("ig", 0, [prev], dim="all")
    else:
        checkpoints = sorted(trace.header.checkpoints)
        initiates = set(trace.header.initiates)

        def forward(i, prev):
            t = compute(i, "fwd", [prev])
            c = comm("fwd", i, [t])
            return c if c is not None else t

        prev = None
        for i in range(n):
            prev = forward(i, prev)
        for i in reversed(range(n)):
            if i in initiates:
                start = max(x for x in checkpoints if x <= i)
                for j in range(start, i):
                    prev = forward(j, prev)
            ig = compute(i, "ig", [prev])
            igc = comm("ig", i, [ig]) if i > 0 else None
            wg = compute(i, "wg", [ig])
            wg_comm(i, [wg])
            prev = g.join([wg, igc])
    g.join([prev, wg_stream[0]])


def estimate_trace(path, fabric, strategy=None, clock_ghz=DEFAULT_CLOCK_GHZ, header=None, params=None,
                   *, trace: Trace | None = None) -> TraceEstimate:
    """Simulate one training iteration of the ASTRA-sim text trace at ``path`` on ``fabric``.

    ``strategy``: MP(a)-DP(b)-PP(1) (default: from the trace's header, see the module docs);
    ``clock_ghz``: the clock of the trace's cycle counts; ``header``: for files without one
    (:func:`fred.model.inputs.astra_trace.load_trace`); ``params``: :class:`fred.model.system.params.WaferParams`
    (network; the NPU compute model does not apply); ``trace``: an already parsed trace."""
    clock = _check_clock(clock_ghz)
    tr = trace if trace is not None else load_trace(path, header=header)
    p = params or default_params()
    fab = canonical_fabric(fabric)
    abc, placement = resolve_strategy(tr, strategy, p)
    plan = _plan(tr, abc, placement, p.npus)
    topo = build_fabric(fab, p)
    sim = Sim(topo)
    g = ScheduleGraph(sim)
    t0 = time.perf_counter()
    _build(g, tr, plan, clock * 1e9)
    res = sim.run()
    wall = time.perf_counter() - t0
    notes = _ignored_notes(tr, plan)
    r = analyse(g, res, abc, notes)
    exposed = {k: float(r.exposed.get(k, 0.0)) for k in TRACE_KINDS[1:]}
    busy = {k: float(r.comm_busy.get(k, 0.0)) for k in TRACE_KINDS[1:]}
    src = str(getattr(res, "timing_source", "") or getattr(getattr(topo, "timing", None), "source", "")
              or p.switch.source)
    return TraceEstimate(trace=str(tr.path), workload=tr.name, kind=tr.kind, header=tr.header.text,
                         header_source="given" if tr.header.given else "file", layers=len(tr.layers),
                         clock_ghz=clock, fabric=fab, strategy=format_strategy(abc), placement=placement,
                         iteration_time=r.iteration_time, compute_time=r.compute_time, compute_busy=r.compute_busy,
                         exposed=exposed, comm_busy=busy, timing_source=src, tasks=r.tasks, sim_seconds=wall,
                         notes=list(r.notes), preemptions=int(getattr(res, "preemptions", 0)))


def trace_table(paths, fabrics=None, strategy=None, clock_ghz=DEFAULT_CLOCK_GHZ, header=None,
                params=None) -> list[TraceEstimate]:
    """Every trace x fabric; ``speedup`` = mesh iteration time / fabric iteration time (the mesh
    is simulated as the reference even if not listed). ``paths``: one path or a list; ``header``
    (for files without one) and ``strategy`` apply to every path."""
    if isinstance(paths, (str, bytes)) or not hasattr(paths, "__iter__"):
        paths = [paths]
    fl = resolve_fabrics(fabrics)
    clock = _check_clock(clock_ghz)
    rows = []
    for path in paths:
        tr = load_trace(path, header=header)
        cells = {f: estimate_trace(path, f, strategy, clock, params=params, trace=tr)
                 for f in ["mesh"] + [x for x in fl if x != "mesh"]}
        rows += speedup_rows(cells, fl)
    return rows


__all__ = ["TraceEstimate", "estimate_trace", "trace_table", "resolve_strategy", "COMM_OPS", "DEFAULT_CLOCK_GHZ"]
