"""Memory per NPU and the policies that make a training configuration fit in HBM.

What one NPU holds during an iteration (bytes; the busiest pipeline stage counts):

* **model states** -- weight-stationary: fp16 weights + ZeRO-2 shards of gradients and Adam state
  (16 B/param in total, 2 B replicated, 14 B / DP; :data:`fred.model.workload.compute.MODEL_STATE_BYTES_PER_PARAM`);
  weight-streaming: three shards of the largest streamed unit (the weights in use, the next
  unit's arriving, and the gradients of the unit in backward, which drain out to the I/O while
  the next unit computes; :data:`fred.model.schedule.memory.STREAM_BUFFERS`);
* **stored activations** -- what the backward pass needs, for every microbatch in flight (GPipe:
  all of them), per :func:`saved_bytes` at the policy's recomputation level;
* **transient** -- what one unit (a transformer layer, or one layer elsewhere) materialises for
  one microbatch on top of that while it is recomputed (:func:`transient_bytes`);
* **offload staging** -- with offloading, two units' stored activations of one microbatch (one
  being written out or read back while the other is used).

Policies (``fred estimate --memory``):

========================  =======================================================================
``none``                  every activation the backward pass needs stays in HBM
``selective``             selective recomputation: the attention core (scores, softmax, dropout,
                          attention over V) is not stored and is recomputed in backward
                          (Korthikanti et al., "Reducing Activation Recomputation in Large
                          Transformer Models", MLSys 2023, Sec. 5)
``recompute``             full recomputation: only each unit's input is stored (activation
                          checkpointing, Chen et al. 2016); backward first recomputes the unit's
                          forward: one extra forward pass on the critical path
``offload``               activations leave through the I/O controllers to off-wafer memory as
                          forward produces them and come back ahead of their backward, as far as
                          they do not fit; the transfers run in the flow simulator on the same
                          I/O links as weight streaming and input loading
``selective+offload``     both; ``recompute+offload``: offloads the checkpoints
``auto`` (default)        ``none`` if it fits; else the fitting policy with the shortest
                          simulated iteration
========================  =======================================================================

A policy that does not fit at the requested microbatch count because one microbatch's working
set or staging is too large splits the microbatch: microbatches are doubled (down to one
sample per microbatch) until it fits; the output says so.

A configuration where no policy fits (model states alone, or states + one unit's working set,
exceed HBM) is refused with a :class:`~fred.FredError` naming the workload, strategy and bytes.
Off-wafer memory is taken as large enough (FRED-SPEC §5 gives its links, not its size).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fred import FredError
from fred.contract.checks import check_choice

from fred.model.workload import compute as C

RECOMPUTE_LEVELS = ("none", "selective", "full")


@dataclass(frozen=True)
class Policy:
    name: str
    recompute: str            # one of RECOMPUTE_LEVELS
    offload: bool
    description: str


POLICIES = {p.name: p for p in (
    Policy("none", "none", False, "all activations kept in HBM"),
    Policy("selective", "selective", False, "selective recomputation of the attention core"),
    Policy("recompute", "full", False, "full recomputation from per-layer checkpoints"),
    Policy("offload", "none", True, "activations offloaded through the I/O controllers"),
    Policy("selective+offload", "selective", True, "selective recomputation + offload through the I/O"),
    Policy("recompute+offload", "full", True, "full recomputation + checkpoints offloaded through the I/O"),
)}
CHOICES = ("auto",) + tuple(POLICIES)
DEFAULT_POLICY = "auto"


def check_policy(name) -> str:
    """A memory policy name (``auto`` or one of :data:`POLICIES`), normalised."""
    return check_choice("memory policy", str(name), CHOICES)


# ---- per layer -------------------------------------------------------------------------------

def checkpoint_bytes(layer) -> float:
    """Bytes per sample kept under full recomputation: the unit's input (a transformer layer's
    input is held by its attention block; elsewhere every layer's output, the next one's input)."""
    return 0.0 if layer.kind == "mlp" else layer.act_bytes


def saved_bytes(layer, level: str, mp: int) -> float:
    """Activation bytes per sample one NPU of an MP group keeps for ``layer``'s backward."""
    if level == "full":
        return checkpoint_bytes(layer)
    tot = layer.act_bytes if layer.saved_bytes is None else layer.saved_bytes
    split = layer.saved_split
    if level == "selective":
        tot -= layer.core_saved
        split -= layer.core_saved
    elif level != "none":
        raise ValueError(f"recompute level {level!r} is unknown; known: {', '.join(RECOMPUTE_LEVELS)}")
    return (tot - split) + split / mp


def transient_bytes(unit, level: str, mp: int) -> float:
    """Bytes per sample that recomputing ``unit`` (a list of layers) materialises on top of what
    is stored: selective -- its attention cores; full -- everything the unit saves without
    recomputation, less its checkpoint; none -- nothing (all of it is already stored)."""
    if level == "none":
        return 0.0
    if level == "selective":
        return sum(l.core_saved for l in unit) / mp
    return sum(saved_bytes(l, "none", mp) - saved_bytes(l, "full", mp) for l in unit)


def recompute_time(layer, level: str, samples: float, mp: int, npu, dtype_bytes: int = 2) -> float:
    """Extra backward time of ``layer`` on one NPU for ``samples`` samples: full -- its forward
    pass again (roofline); selective -- its attention core's forward (roofline of the core's
    FLOPs and HBM traffic); none -- 0."""
    if level == "none":
        return 0.0
    if level == "full":
        return C.layer_time(layer, "fwd", samples, mp, npu, dtype_bytes)
    if not layer.core_flops and not layer.core_mem_bytes:
        return 0.0
    return max(layer.core_flops * samples / mp / npu.flops, layer.core_mem_bytes * samples / mp / npu.hbm_bw)


# ---- per stage -------------------------------------------------------------------------------

@dataclass
class StageMemory:
    """Memory of one pipeline stage's NPU under one policy. ``pieces`` are the stored
    activation pieces (bytes per NPU) in the order backward needs them; ``offload`` gives the
    bytes of each piece that go off-wafer (same order)."""
    states: float
    pieces: list
    transient: float
    staging: float                       # offload staging if anything is offloaded
    offload: list = field(default_factory=list)
    limit: float = 0.0

    @property
    def stored(self) -> float:
        return sum(self.pieces)

    @property
    def offloaded(self) -> float:
        return sum(self.offload)

    @property
    def need(self) -> float:
        """Peak bytes per NPU (with offloading: what stays + the staging buffers)."""
        return self.states + self.stored - self.offloaded + self.transient + (self.staging if self.offloaded else 0.0)

    @property
    def fits(self) -> bool:
        return self.need <= self.limit * (1 + 1e-12)


def plan_stage(states, pieces, transient, staging, hbm, offload: bool) -> StageMemory:
    """Lay out one stage: without ``offload`` everything stays; with it, the pieces needed first
    in backward stay (as many as fit, the boundary piece in part) and the rest is offloaded."""
    st = StageMemory(float(states), [float(x) for x in pieces], float(transient), float(staging),
                     [0.0] * len(pieces), float(hbm))
    if not offload or st.need <= hbm:
        return st
    room = hbm - st.states - st.transient - st.staging
    if room < 0:                          # even an empty HBM cannot stage: offload all, report the need
        st.offload = list(st.pieces)
        return st
    for i, b in enumerate(st.pieces):
        keep = min(b, room)
        room -= keep
        st.offload[i] = b - keep
    return st


@dataclass
class MemoryPlan:
    """The memory of every stage under one policy at one microbatch count."""
    policy: Policy
    microbatches: int
    stages: list                          # StageMemory per pipeline stage

    @property
    def need(self) -> float:
        return max(s.need for s in self.stages)

    @property
    def fits(self) -> bool:
        return all(s.fits for s in self.stages)

    @property
    def states(self) -> float:
        return max(s.states for s in self.stages)

    @property
    def offloaded(self) -> float:
        """Bytes per NPU offloaded (busiest stage); each goes out once and comes back once."""
        return max(s.offloaded for s in self.stages)

    def busiest(self) -> StageMemory:
        return max(self.stages, key=lambda s: s.need)


def refusal(workload, strategy: str, mode: str, hbm: float, plans, microbatches) -> FredError:
    """The one-line error for a configuration no policy fits: the smallest need and its parts."""
    best = min(plans, key=lambda p: p.need)
    s = best.busiest()
    parts = [f"model states {s.states / 1e9:.1f} GB"]
    if s.transient:
        parts.append(f"one unit's working set {s.transient / 1e9:.1f} GB")
    if s.offloaded:
        parts.append(f"offload staging {s.staging / 1e9:.1f} GB")
    kept = s.stored - s.offloaded
    if kept > 0:
        parts.append(f"stored activations {kept / 1e9:.1f} GB")
    what = "under any memory policy" if len(plans) > 1 else f"with memory policy {best.policy.name}"
    alone = " (model states alone exceed HBM)" if s.states > hbm else ""
    mbs = "" if best.microbatches == microbatches else f", split into {best.microbatches} microbatches"
    return FredError(f"{workload} {strategy} ({mode}) does not fit in HBM ({hbm / 1e9:.3g} GB per NPU) {what}: "
                     f"needs at least {best.need / 1e9:.1f} GB per NPU{alone} = {' + '.join(parts)} "
                     f"(policy {best.policy.name}{mbs})")
