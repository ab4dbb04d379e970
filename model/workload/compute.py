"""NPU compute model: peak FLOP/s, HBM bandwidth and capacity, a roofline per layer.

NPU presets (``NPU_PRESETS``, ``fred estimate --npu NAME``); every figure is defined once, here,
with its source:

* ``h100`` (the default; FRED-SPEC §5: "H100-like die + 5 HBM3 stacks"):
  * ``PEAK_FLOPS``   989.4e12 FLOP/s -- NVIDIA H100 SXM5 dense FP16/BF16 Tensor Core peak (NVIDIA
    H100 Tensor Core GPU datasheet, 2022: 1,979 TFLOPS with 2:4 sparsity, i.e. 989.4 dense).
  * ``HBM_BW``       3 TB/s -- FRED-SPEC §5 / paper §6.2.2 (3 TB/s local HBM per NPU). The H100
    SXM5 itself has 3.35 TB/s (same datasheet); the wafer's NPU keeps the paper's 3 TB/s.
  * ``HBM_CAPACITY`` 80 GB -- H100 SXM5 (5 active HBM3 stacks x 16 GB, same datasheet), matching
    the paper's "5 HBM3 stacks" NPU.
* ``b200`` (a newer part, for comparison; not the paper's NPU):
  * ``B200_PEAK_FLOPS``   2.25e15 FLOP/s -- approximately, per NVIDIA's HGX B200 / Blackwell
    datasheet (2024): 4.5 PFLOPS FP16/BF16 Tensor Core with 2:4 sparsity per GPU, 2.25 dense
    (the 1,000 W HGX configuration).
  * ``B200_HBM_BW``       8 TB/s and ``B200_HBM_CAPACITY`` 192 GB of HBM3e -- approximately, per
    the same datasheet (NVIDIA's DGX B200 datasheet lists 1,440 GB for 8 GPUs, i.e. 180 GB usable
    per GPU). The preset uses the part's own bandwidth, not the wafer's 3 TB/s.

Utilisation (``UTILISATION``, both presets): **0.52** of peak FLOP/s for compute-bound layers --
Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC 2021 (abstract and Table 1): Megatron's 1T-parameter GPT (this repository's
Transformer-1T) trains at 163 TFLOP/s per A100, 52% of its 312 TFLOP/s peak. That figure counts
the recomputation FLOPs (their FLOP formula includes the recomputed forward pass), which this
model charges explicitly (:mod:`fred.model.workload.memory`), so it is the matching kind of figure (a
hardware-FLOPs utilisation). Published model-FLOPs utilisations of large-model training lie
around it: PaLM 540B 46.2% (Chowdhery et al. 2022, Table 3), MegaScale 55.2% at 175B on 12,288
GPUs (Jiang et al., NSDI 2024). These end-to-end figures include communication stalls and
pipeline bubbles that this model simulates separately, so 0.52 is a conservative (low) figure
for the compute kernels alone; ``--utilisation 1`` gives the ideal roofline used before.
HBM bandwidth is not derated (no sourced figure for sustained HBM efficiency).

Other constants:

* ``OPTIMIZER_BYTES_PER_PARAM`` 16 -- ours: mixed-precision Adam state read + written per
  parameter at the optimizer step (fp32 master, m, v = 12 B, plus the fp16 weight and gradient),
  charged against HBM bandwidth; ZeRO-2 divides it by DP.
* ``MODEL_STATE_BYTES_PER_PARAM`` 16 -- fp16 weight (2) + fp16 gradient (2) + fp32 Adam master
  weight, momentum, variance (12) (Rajbhandari et al., ZeRO, SC'20, Sec. 3.1: 2 + 2 + K, K = 12).

Roofline of a layer: ``max(flops / (peak x utilisation), bytes / HBM bandwidth)``. Memory
traffic of a layer on an NPU: its weight shard (read once per microbatch and phase) plus its
activation traffic (``Layer.fwd_mem_bytes`` in forward, twice that in backward), with the
MP-split part of the activations divided by MP.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fred import FredError
from fred.contract.checks import check_choice

PEAK_FLOPS = 989.4e12
HBM_BW = 3.0e12
HBM_CAPACITY = 80e9
B200_PEAK_FLOPS = 2.25e15
B200_HBM_BW = 8.0e12
B200_HBM_CAPACITY = 192e9
UTILISATION = 0.52
UTILISATION_SOURCE = ("0.52 of peak: Megatron-LM 1T GPT, 163 TFLOP/s per A100 = 52% of peak "
                      "(Narayanan et al., SC 2021)")
OPTIMIZER_BYTES_PER_PARAM = 16
MODEL_STATE_BYTES_PER_PARAM = 16
NPU_SOURCE = "H100 SXM5-like: 989.4 TFLOP/s dense FP16 (NVIDIA H100 datasheet, 2022), 3 TB/s HBM (FRED-SPEC §5), 80 GB"
B200_SOURCE = ("B200-like: ~2.25 PFLOP/s dense FP16, ~8 TB/s HBM3e, ~192 GB "
               "(approximately, per NVIDIA HGX B200 datasheet, 2024)")


@dataclass(frozen=True)
class NpuParams:
    peak_flops: float = PEAK_FLOPS
    hbm_bw: float = HBM_BW
    hbm_capacity: float = HBM_CAPACITY
    utilisation: float = UTILISATION
    source: str = NPU_SOURCE
    name: str = "h100"

    def __post_init__(self):
        for k in ("peak_flops", "hbm_bw", "hbm_capacity"):
            if not getattr(self, k) > 0:
                raise FredError(f"NPU {k} must be > 0, got {getattr(self, k)!r}")
        if not 0 < self.utilisation <= 1:
            raise FredError(f"NPU utilisation must be in (0, 1], got {self.utilisation!r}")

    @property
    def flops(self) -> float:
        """Sustained FLOP/s = peak x utilisation."""
        return self.peak_flops * self.utilisation

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the roofline turns from memory- to compute-bound."""
        return self.flops / self.hbm_bw

    def replace(self, **kw) -> "NpuParams":
        return replace(self, **kw)


#: the NPU presets (``fred estimate --npu NAME``); figures and sources above
NPU_PRESETS = {
    "h100": NpuParams(),
    "b200": NpuParams(peak_flops=B200_PEAK_FLOPS, hbm_bw=B200_HBM_BW, hbm_capacity=B200_HBM_CAPACITY,
                      source=B200_SOURCE, name="b200"),
}
DEFAULT_NPU = "h100"


def npu_preset(name: str = DEFAULT_NPU) -> NpuParams:
    """The preset called ``name`` (``h100``, ``b200``; case-insensitive)."""
    return NPU_PRESETS[check_choice("npu", name, tuple(NPU_PRESETS))]


def default_npu() -> NpuParams:
    return NPU_PRESETS[DEFAULT_NPU]


# ours: fraction of a layer's forward activation traffic that is split by MP (the rest -- the
# replicated block input/output -- is read/written in full by every MP member), for layers that
# do not give it (``Layer.mem_split``; the transformers derive it from their shape)
def _mp_split_fraction(kind: str) -> float:
    return {"attention": 0.75, "mlp": 0.8, "logits": 0.9, "conv": 0.5, "fc": 0.5}.get(kind, 0.0)


def layer_cost(layer, phase: str, samples: float, mp: int, npu: NpuParams, dtype_bytes: int = 2):
    """(flops, bytes) one NPU spends on ``layer`` for ``samples`` samples in ``phase``."""
    if phase not in ("fwd", "bwd"):
        raise ValueError(f"phase must be 'fwd' or 'bwd', got {phase!r}")
    flops = (layer.fwd_flops if phase == "fwd" else layer.bwd_flops) * samples / mp
    split = getattr(layer, "mem_split", None)
    f = (_mp_split_fraction(layer.kind) if split is None else split) if mp > 1 else 0.0
    act = layer.fwd_mem_bytes * samples * ((1 - f) + f / mp)
    if phase == "bwd":
        act *= 2
    wbytes = layer.params * dtype_bytes / mp * (1 if phase == "fwd" else 2)   # bwd: read W, write dW
    return flops, act + wbytes


def layer_time(layer, phase: str, samples: float, mp: int = 1, npu: NpuParams | None = None,
               dtype_bytes: int = 2) -> float:
    """Roofline time of ``layer`` on one NPU: max(flops / FLOP/s, bytes / HBM bandwidth)."""
    npu = npu or default_npu()
    flops, nbytes = layer_cost(layer, phase, samples, mp, npu, dtype_bytes)
    return max(flops / npu.flops, nbytes / npu.hbm_bw)


def layers_time(layers, phase, samples, mp=1, npu=None, dtype_bytes=2) -> float:
    npu = npu or default_npu()
    return sum(layer_time(l, phase, samples, mp, npu, dtype_bytes) for l in layers)


def optimizer_time(params_per_npu: float, dp: int, npu: NpuParams | None = None) -> float:
    """HBM-bound optimizer step on one NPU's share (ZeRO-2: 1/DP of its parameters)."""
    npu = npu or default_npu()
    return params_per_npu / dp * OPTIMIZER_BYTES_PER_PARAM / npu.hbm_bw


def roofline_bound(layer, phase, samples, mp=1, npu=None, dtype_bytes=2) -> str:
    npu = npu or default_npu()
    flops, nbytes = layer_cost(layer, phase, samples, mp, npu, dtype_bytes)
    return "compute" if flops / npu.flops >= nbytes / npu.hbm_bw else "memory"
