"""NPU compute model: peak FLOP/s, HBM bandwidth and capacity, a roofline per layer.

One documented H100-like default (FRED-SPEC §5: "H100-like die + 5 HBM3 stacks"); every
constant is defined once, here, with its source:

* ``PEAK_FLOPS``   989.4e12 FLOP/s -- NVIDIA H100 SXM5 dense FP16/BF16 Tensor Core peak
  (NVIDIA H100 Tensor Core GPU datasheet / architecture whitepaper, 2022: 1,979 TFLOPS with
  2:4 sparsity, 989.4 dense).
* ``HBM_BW``       3 TB/s -- FRED-SPEC §5 / paper §6.2.2 (3 TB/s local HBM per NPU).
* ``HBM_CAPACITY`` 80 GB -- H100 SXM5 (5 active HBM3 stacks x 16 GB), matching the paper's
  "5 HBM3 stacks" NPU.
* ``UTILISATION``  1.0 -- ours: no derating; every layer runs at its roofline
  ``max(flops / peak, bytes / HBM_BW)``. The paper gives no NPU efficiency; an ideal NPU is the
  choice most favourable to communication mattering at all (see docs/training.md).
* ``OPTIMIZER_BYTES_PER_PARAM`` 16 -- ours: mixed-precision Adam state read + written per
  parameter at the optimizer step (fp32 master, m, v = 12 B, plus the fp16 weight and gradient),
  charged against HBM bandwidth; ZeRO-2 divides it by DP.
* ``MODEL_STATE_BYTES_PER_PARAM`` 16 -- fp16 weight (2) + fp16 gradient (2) + fp32 Adam master
  weight, momentum, variance (12) (Rajbhandari et al., ZeRO, SC'20, Sec. 3.1: 2 + 2 + K, K = 12).

Memory traffic of a layer on an NPU: its weight shard (read once per microbatch and phase) plus
its activation traffic (``Layer.fwd_mem_bytes`` in forward, twice that in backward), with the
MP-split part of the activations divided by MP.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fred import FredError

PEAK_FLOPS = 989.4e12
HBM_BW = 3.0e12
HBM_CAPACITY = 80e9
UTILISATION = 1.0
OPTIMIZER_BYTES_PER_PARAM = 16
MODEL_STATE_BYTES_PER_PARAM = 16
NPU_SOURCE = "H100 SXM5-like: 989.4 TFLOP/s dense FP16 (NVIDIA datasheet), 3 TB/s HBM (FRED-SPEC §5), 80 GB"


@dataclass(frozen=True)
class NpuParams:
    peak_flops: float = PEAK_FLOPS
    hbm_bw: float = HBM_BW
    hbm_capacity: float = HBM_CAPACITY
    utilisation: float = UTILISATION
    source: str = NPU_SOURCE

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


def default_npu() -> NpuParams:
    return NpuParams()


# fraction of a layer's forward activation traffic that is split by Megatron MP (the rest -- the
# replicated block input/output -- is read/written in full by every MP member)
def _mp_split_fraction(kind: str) -> float:
    return {"attention": 0.75, "mlp": 0.8, "logits": 0.9, "conv": 0.5, "fc": 0.5}.get(kind, 0.0)


def layer_cost(layer, phase: str, samples: float, mp: int, npu: NpuParams, dtype_bytes: int = 2):
    """(flops, bytes) one NPU spends on ``layer`` for ``samples`` samples in ``phase``."""
    if phase not in ("fwd", "bwd"):
        raise ValueError(f"phase must be 'fwd' or 'bwd', got {phase!r}")
    flops = (layer.fwd_flops if phase == "fwd" else layer.bwd_flops) * samples / mp
    f = _mp_split_fraction(layer.kind) if mp > 1 else 0.0
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
