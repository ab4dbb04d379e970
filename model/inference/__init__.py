"""LLM inference on the wafer (``fred infer``): prefill and decode of a decoder transformer,
mesh vs Fred-A..D.

* :mod:`.costs` -- what one NPU computes, reads and holds per block and step (weights, key/value
  cache, roofline), and the HBM check;
* :mod:`.serve` -- the steps as task graphs in the flow simulator, the figures (time to first
  token, time per output token, tokens per second, exposed communication per kind);
* :mod:`.plot` -- the per-fabric breakdown plot.
"""

from .costs import MAX_BATCH, MAX_TOKENS, Shape, check_memory, memory_per_npu, shape_of
from .plot import plot_inference
from .serve import COMM_KINDS, DEFAULT_STRATEGIES, Inference, default_strategy, infer, infer_table, plan, step_compute

__all__ = ["COMM_KINDS", "DEFAULT_STRATEGIES", "MAX_BATCH", "MAX_TOKENS", "Inference", "Shape", "check_memory",
           "default_strategy", "infer", "infer_table", "memory_per_npu", "plan", "plot_inference", "shape_of",
           "step_compute"]
