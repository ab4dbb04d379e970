"""Full-wafer training estimates: a workload on a fabric, and the mesh-vs-FRED table.

>>> from fred.model.training.estimator import estimate
>>> e = estimate("resnet-152", "fred-d")          # doctest: +SKIP
>>> e.iteration_time, e.exposed["dp"], e.speedup   # doctest: +SKIP

``estimate_table`` runs every workload on every fabric and fills ``speedup`` = mesh iteration
time / fabric iteration time (the mesh is always simulated as the reference).

One parameter set for everything: :func:`fred.model.system.params.default_params` (network, FRED-SPEC
§5) and :func:`fred.model.workload.compute.default_npu` (H100-like NPU at the sourced utilisation). Nothing is tuned per workload or
per fabric; overrides apply to every cell of a table alike.

Memory policy in a comparison (``memory_choice``): which memory policy makes a configuration fit
in HBM (:mod:`fred.model.workload.memory`) does not depend on the network, but under ``auto`` the cheapest
fitting policy is picked by simulation, and the cheapest on one fabric need not be the cheapest
on another. So that a comparison compares networks, by default (``"shared"``) every fabric runs
the policy :data:`REFERENCE_FABRIC` (the mesh, which every comparison simulates) chose for the
same workload, strategy, NPU and samples; ``"per-fabric"`` lets each fabric pick its own (the
old behaviour; the results say so). An explicit policy (``memory="offload"``, ...) is one policy
for every fabric anyway.

Figures: ``compute_time`` is the busiest NPU's busy compute (forward, backward, recomputation and
the optimizer step; the same on every fabric for one plan); ``critical_path_compute`` is the
part of the iteration the critical path spends in compute (pipeline fill and drain included), so
``critical_path_compute + exposed_comm = iteration_time``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from fred.contract.checks import check_choice, check_int, check_number

from fred.model.workload import compute as C
from fred.model.system import canonical_fabric, default_params
from fred.model.collectives import expert_parallel, format_strategy, parse_strategy
from fred.model.workload import DEFAULT_POLICY, check_policy
from fred.model.schedule import DEFAULT_GRANULARITY, DEFAULT_STREAM_STEPS, KINDS, build_and_run
from fred.model.network import build_fabric
from fred.model.workload import default_workloads, load_workload, workload_ref
from fred.model.schedule import INTER_WAFER
from fred.model.collectives import MAX_WAFERS, OffWaferLevel, off_wafer_network

FABRIC_ORDER = ("mesh", "fred-a", "fred-b", "fred-c", "fred-d")
#: every fabric in table order: the default table's, then the other baselines (fred.model.system.params)
ALL_FABRICS = FABRIC_ORDER + ("torus", "switched", "switched-inr")

#: FRED-SPEC §7 / paper Fig. 10: end-to-end speedup over the mesh
PAPER_SPEEDUPS = {
    "resnet-152": {"fred-c": 1.41, "fred-d": 1.76},
    "transformer-17b": {"fred-c": 1.75, "fred-d": 1.87},
    "gpt3-175b": {"fred-c": 1.34, "fred-d": 1.34},
    "transformer-1t": {"fred-c": 1.40, "fred-d": 1.40},
}


@dataclass
class Estimate:
    workload: str
    fabric: str
    strategy: str
    mode: str
    microbatches: int
    samples_per_replica: float
    minibatch: float
    iteration_time: float
    compute_time: float                   # busy compute of the busiest NPU (incl. recomputation)
    critical_path_compute: float          # compute on the critical path (pipeline fill/drain incl.)
    exposed: dict
    comm_busy: dict
    memory_per_npu: float
    timing_source: str
    tasks: int
    sim_seconds: float
    speedup: float | None = None
    paper_speedup: float | None = None
    notes: list = field(default_factory=list)
    preemptions: int = 0
    memory_policy: str = "none"           # fred.model.workload.memory policy applied
    memory_before: float = 0.0            # bytes per NPU with every activation in HBM (policy none)
    memory_states: float = 0.0            # of memory_per_npu: model states / streamed buffers
    offload_bytes: float = 0.0            # activation bytes per NPU offloaded through the I/O (and read back)
    recompute_time: float = 0.0           # recomputation seconds on the busiest NPU (part of compute)
    memory_candidates: list = field(default_factory=list)
    hbm_capacity: float = 0.0
    npu: str = ""                         # NPU description (preset and source)
    wafers: int = 1                       # wafers training data-parallel (fred.model.collectives.offwafer)
    off_wafer: str = ""                   # the off-wafer network joining them ("" for one wafer)
    memory_choice: str = "shared"         # "shared", "per-fabric" or "requested" (see the module docs)
    memory_chosen_on: str = ""            # the fabric whose simulation picked the policy ("" if requested)
    #: what the fabric moves an all-to-all at (FRED: the switch's measured all-to-all throughput
    #: from the timing file, or line rate when it has none; the mesh: its links)
    all_to_all_source: str = ""
    expert_parallel: int = 1              # EP of the strategy (MoE workloads)

    @property
    def exposed_comm(self) -> float:
        return sum(self.exposed.values())

    @property
    def beyond_compute(self) -> float:
        """Iteration time the busiest NPU does not compute (pipeline fill and drain, and the
        communication it waits for): iteration - busy compute. Unlike the exposed kinds it does
        not depend on which of two nearly critical chains the critical path follows."""
        return max(0.0, self.iteration_time - self.compute_time)

    @property
    def compute_busy(self) -> float:
        """The busiest NPU's busy compute (= ``compute_time``)."""
        return self.compute_time

    def to_dict(self) -> dict:
        d = asdict(self)
        d["exposed_comm"] = self.exposed_comm
        d["pipeline_bubble"] = max(0.0, self.critical_path_compute - self.compute_time)
        d["beyond_compute"] = self.beyond_compute
        d["memory_per_npu"] = int(round(self.memory_per_npu))
        d["memory_before"] = int(round(self.memory_before))
        d["memory_states"] = int(round(self.memory_states))
        d["offload_bytes"] = int(round(self.offload_bytes))
        d["hbm_capacity"] = int(round(self.hbm_capacity))
        return d


def _microbatches_for(w, abc, microbatches):
    if microbatches:
        return int(microbatches)
    a, b, c = abc
    if w.mode == "weight-streaming" or c > 1:
        return w.microbatches
    return 1


#: the ranges of estimate()'s figures (as the CLI's: each microbatch and step is simulated)
MAX_MICROBATCHES = 1024
MAX_SAMPLES = 1e6
MAX_STEPS = 256

#: how the memory policy of a comparison is chosen (module docs); the first is the default
MEMORY_CHOICES = ("shared", "per-fabric")
#: the fabric whose simulation picks the shared memory policy: the reference of every comparison
REFERENCE_FABRIC = "mesh"
#: reference choices remembered per process (a comparison asks once per fabric)
_REFERENCE_MEMO: dict = {}
_REFERENCE_MEMO_SIZE = 1024


def check_memory_choice(choice) -> str:
    return check_choice("memory choice", str(choice), MEMORY_CHOICES)


def _reference_key(w, abc, m, B, p, npu, granularity, stream_steps, level=None):
    """What the reference fabric's choice depends on (the network parameters too: a policy's
    simulated cost does)."""
    return hash((repr(w), abc, m, B, repr(p), repr(npu), granularity, stream_steps, repr(level)))


def _remember(key, policy):
    if len(_REFERENCE_MEMO) >= _REFERENCE_MEMO_SIZE:
        _REFERENCE_MEMO.pop(next(iter(_REFERENCE_MEMO)))
    _REFERENCE_MEMO[key] = policy


def reference_policy(w, abc, m, B, p, npu, granularity, stream_steps, level=None) -> str:
    """The memory policy ``auto`` picks on :data:`REFERENCE_FABRIC` for this configuration
    (simulated once per process; raises :class:`~fred.FredError` when no policy fits)."""
    key = _reference_key(w, abc, m, B, p, npu, granularity, stream_steps, level)
    pol = _REFERENCE_MEMO.get(key)
    if pol is None:
        r = build_and_run(w, build_fabric(REFERENCE_FABRIC, p), abc, npu=npu, microbatches=m, samples_per_replica=B,
                          granularity=granularity, stream_steps=stream_steps, memory="auto", wafers=level)
        pol = r.memory_policy
        _remember(key, pol)
    return pol


def estimate(workload, fabric, strategy=None, *, params=None, npu=None, microbatches=None,
             samples_per_replica=None, mode=None, granularity=DEFAULT_GRANULARITY,
             stream_steps=DEFAULT_STREAM_STEPS, memory=DEFAULT_POLICY, wafers=1, off_wafer=None,
             memory_choice="shared", reference_memory=None) -> Estimate:
    """Simulate one training iteration of ``workload`` on ``fabric`` ("mesh", "fred-a".."fred-d",
    "torus", "switched", "switched-inr").

    ``wafers``: W wafers of that fabric training data-parallel across wafers, joined through their
    I/O controllers by ``off_wafer`` (a name of :data:`fred.model.collectives.offwafer.NETWORKS`, a YAML path or
    an :class:`~fred.model.collectives.offwafer.OffWaferNetwork`; default ``ndr``): one wafer's schedule is
    simulated with the inter-wafer level inserted (:mod:`fred.model.schedule.iteration.multiwafer`), and
    ``exposed["inter_wafer"]`` is its share of the critical path; ``samples_per_replica`` stays per
    DP replica of a wafer, so the global minibatch is W x DP x samples. ``wafers=1`` is one wafer,
    exactly as without the option.

    ``memory`` is the memory policy (:mod:`fred.model.workload.memory`; default ``auto``: the cheapest
    that fits). Under ``auto``, ``memory_choice`` says whose cheapest: ``"shared"`` (default) the
    policy the mesh picks for the same configuration (so that fabrics compared differ only in
    the network; ``reference_memory``, if given, is that policy, already known), ``"per-fabric"``
    this fabric's own. A configuration that fits under no allowed policy raises
    :class:`~fred.FredError`. A wrong type raises ``TypeError``, a value out of range
    ``ValueError`` (fred.contract.checks)."""
    if microbatches is not None:
        check_int("microbatches", microbatches, 1, MAX_MICROBATCHES)
    if samples_per_replica is not None:
        check_number("samples_per_replica", samples_per_replica, 0, MAX_SAMPLES, low_open=True)
    check_int("granularity", granularity, 1, MAX_STEPS)
    check_int("stream_steps", stream_steps, 1, MAX_STEPS)
    level = multi_wafer(wafers, off_wafer, params)
    if mode is not None and not isinstance(mode, str):
        raise TypeError(f"mode must be weight-stationary or weight-streaming, not {type(mode).__name__} {mode!r}")
    policy = check_policy(memory)
    memory_choice = check_memory_choice(memory_choice)
    if reference_memory is not None:
        reference_memory = check_policy(reference_memory)
    w = load_workload(workload)
    if mode:
        w = w.with_mode(mode)
    fab = canonical_fabric(fabric)
    p = params or default_params()
    npu = npu or C.default_npu()
    st = strategy or w.strategy
    abc = parse_strategy(st, npus=p.npus)
    ep = expert_parallel(st)
    m = _microbatches_for(w, abc, microbatches)
    B = float(samples_per_replica or w.samples_per_replica)
    topo = build_fabric(fab, p)
    sched = st if isinstance(st, str) else abc     # the strategy as the schedule takes it (EP included)
    run_policy, choice, chosen_on = policy, "requested", ""
    if policy == "auto":
        choice = memory_choice
        chosen_on = REFERENCE_FABRIC if memory_choice == "shared" else fab
        if memory_choice == "shared" and fab != REFERENCE_FABRIC:
            run_policy = reference_memory or reference_policy(w, sched, m, B, p, npu, granularity, stream_steps, level)
    r = build_and_run(w, topo, sched, npu=npu, microbatches=m, samples_per_replica=B, granularity=granularity,
                      stream_steps=stream_steps, memory=run_policy, wafers=level)
    if policy == "auto" and fab == REFERENCE_FABRIC:
        _remember(_reference_key(w, sched, m, B, p, npu, granularity, stream_steps, level), r.memory_policy)
    W = level.wafers if level is not None else 1
    exposed = dict(r.exposed)
    if W > 1:
        exposed.setdefault(INTER_WAFER, 0.0)
    return Estimate(workload=w.name, fabric=fab, strategy=format_strategy(abc, ep), mode=w.mode,
                    microbatches=r.microbatches or m, wafers=W, off_wafer=level.network.name if W > 1 else "",
                    samples_per_replica=B, minibatch=B * abc[1] * W, iteration_time=r.iteration_time,
                    compute_time=r.compute_busy, critical_path_compute=r.compute_time, exposed=exposed,
                    comm_busy=dict(r.comm_busy), memory_per_npu=r.memory_per_npu,
                    timing_source=r.timing_source or p.switch.source, tasks=r.tasks, sim_seconds=r.sim_seconds,
                    paper_speedup=PAPER_SPEEDUPS.get(w.name, {}).get(fab), notes=list(r.notes),
                    preemptions=r.preemptions, memory_policy=r.memory_policy, memory_before=r.memory_before,
                    memory_states=r.memory_states, offload_bytes=r.offload_bytes, recompute_time=r.recompute_busy,
                    memory_candidates=list(r.memory_candidates), hbm_capacity=npu.hbm_capacity, npu=npu.source,
                    memory_choice=choice, memory_chosen_on=chosen_on,
                    all_to_all_source=(p.switch.all_to_all_source if topo.fred_switches
                                       else "line rate (not a fabric of FRED switches)"),
                    expert_parallel=ep)


def multi_wafer(wafers=1, off_wafer=None, params=None):
    """The :class:`~fred.model.collectives.offwafer.OffWaferLevel` of ``wafers`` wafers of ``params`` (default
    set) on ``off_wafer``, or None for one wafer (``off_wafer`` is then refused if given). The
    function ``estimate`` and other front ends (inference, sweeps) share to set the level up."""
    check_int("wafers", wafers, 1, MAX_WAFERS)
    if wafers == 1:
        if off_wafer is not None:
            raise ValueError("off_wafer needs wafers > 1 (one wafer has no off-wafer network)")
        return None
    p = params or default_params()
    try:
        net = off_wafer_network(off_wafer)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"off_wafer: {exc}") from None
    return OffWaferLevel(wafers, net, p.io_count, p.io_bw)


def resolve_workloads(names=None) -> list[str]:
    """The workloads named (bundled names or files), default the training table's: the paper's
    four (other bundled files, such as llama2-70b for ``fred infer``, run when named)."""
    if not names:
        return default_workloads()
    out = []
    for n in names:
        for part in str(n).split(","):
            part = part.strip()
            if part:
                out.append(workload_ref(part))
    return out


def resolve_fabrics(names=None) -> list[str]:
    if not names:
        return list(FABRIC_ORDER)
    out = []
    for n in names:
        for part in str(n).split(","):
            if part.strip():
                f = canonical_fabric(part)
                if f not in out:
                    out.append(f)
    return out


def estimate_table(workloads=None, fabrics=None, strategy=None, progress=None, **kw) -> list[Estimate]:
    """Every workload x fabric; ``speedup`` relative to the mesh (simulated even if not listed).
    ``progress(what)``, if given, is called once per estimate, as it starts."""
    wl = resolve_workloads(workloads)
    fl = resolve_fabrics(fabrics)
    rows = []
    for wn in wl:
        cells = {}
        for f in (["mesh"] + [x for x in fl if x != "mesh"]):
            if progress is not None:
                progress(f"{wn} on {f}")
            ref = {}
            if f != "mesh" and cells["mesh"].memory_choice == "shared":
                ref["reference_memory"] = cells["mesh"].memory_policy     # the mesh's pick, on every fabric
            cells[f] = estimate(wn, f, strategy, **kw, **ref)
        rows += speedup_rows(cells, fl)
    return rows


def speedup_rows(cells: dict, fabrics) -> list:
    """The estimates of ``fabrics`` from ``cells`` (fabric -> estimate, the mesh included), each
    with its ``speedup`` over the mesh set (None for a zero iteration time)."""
    base = cells["mesh"].iteration_time
    rows = []
    for f in fabrics:
        e = cells[f]
        e.speedup = base / e.iteration_time if e.iteration_time > 0 else None
        rows.append(e)
    return rows


__all__ = ["Estimate", "estimate", "estimate_table", "multi_wafer", "PAPER_SPEEDUPS", "FABRIC_ORDER", "ALL_FABRICS",
           "KINDS", "MEMORY_CHOICES", "REFERENCE_FABRIC", "reference_policy"]
