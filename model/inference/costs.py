"""What one NPU computes, reads and holds when a decoder transformer serves requests.

Per transformer layer, a serving step runs the attention block and the MLP block, each ending
with a Megatron tensor-parallel (MP) All-Reduce of its output activation (Shoeybi et al. 2019),
as in training's forward pass. Per NPU of an MP(a) group, for ``tokens`` tokens of a replica:

* weights: the block's parameters of the training derivation (:func:`fred.model.workload.transformer_layers`,
  grouped-query attention included), split over MP, read once per step;
* attention core: each token attends to its sequence's context: ``4 x context x d / a`` FLOPs
  (scores and weighted sum over the heads of this NPU) and, in decode, the context's key/value
  cache read from HBM: ``context x 2 x kv_heads x d_head x bytes`` per layer, with the key/value
  heads split over MP (replicated when MP exceeds them, as Megatron does);
* prefill writes the key/value cache of the prompt and computes the causal attention core
  (``2 x prompt^2 x d / a`` FLOPs per sequence), without materialising the scores
  (FlashAttention, Dao et al., NeurIPS 2022): its HBM traffic is the weights, the cache written
  and the activations that enter and leave each matrix product;
* the output head (weights tied to the embedding) runs for the last position of each sequence
  only: ``2 d V / a`` FLOPs per sequence and the ``V x d`` matrix read on the last stage.

Time of a block: the NPU roofline of :mod:`fred.model.compute`:
``max(FLOPs / (peak x utilisation), bytes / HBM bandwidth)``. Decode at small batches is
memory-bound: its time is the bytes read at the NPU's HBM bandwidth.

Memory per NPU (checked against the NPU's HBM before anything is simulated): the stage's weight
share, the key/value cache of ``batch x (prompt + output)`` tokens, and the prefill working set
(one block's activations).
"""

from __future__ import annotations

from dataclasses import dataclass

from fred import FredError

from ..compute import NpuParams

__all__ = ["Shape", "Block", "shape_of", "stage_layers", "memory_per_npu", "check_memory"]

#: most sequences per replica, prompt and output tokens (a step costs the same to simulate at
#: any size; beyond these the cache of one NPU exceeds every HBM preset many times over)
MAX_BATCH = 65_536
MAX_TOKENS = 2**20
#: bytes of a token id handed from the last pipeline stage back to the first (int32)
TOKEN_BYTES = 4
#: bytes each MP member contributes to the sampling reduce over a vocabulary-parallel output
#: head: the best logit (fp32) and its token id (int32) per sequence (greedy sampling)
ARGMAX_BYTES = 8


@dataclass(frozen=True)
class Shape:
    """A decoder transformer's serving shape (from a workload of kind ``transformer``)."""

    name: str
    layers: int
    d: int
    heads: int
    kv_heads: int
    ffn: float              # two-matrix MLP width (ffn_mult x d)
    vocab: int
    context: int            # the model's context window (the workload's seq)
    b: int                  # bytes per value
    attn_params: float      # per layer
    mlp_params: float       # per layer
    embed_params: float     # the embedding table (tied output head: V x d of it)

    @property
    def d_head(self) -> int:
        return self.d // self.heads

    def kv_heads_per_npu(self, a: int) -> float:
        """Key/value heads one NPU of MP(a) holds: split, or replicated when a > kv_heads."""
        return max(self.kv_heads / a, 1.0)

    def kv_bytes(self, a: int) -> float:
        """Key/value cache bytes per token and layer on one NPU of MP(a)."""
        return 2 * self.kv_heads_per_npu(a) * self.d_head * self.b


def shape_of(w) -> Shape:
    """The serving shape of workload ``w`` (a :class:`fred.model.workload.Workload`); a workload of
    another kind is one FredError line naming it."""
    if w.kind != "transformer":
        raise FredError(f"workload {w.name} is a {w.kind} model: fred infer serves decoder transformers")
    sh = w.shape
    attn = [l.params for l in w.layers if l.kind == "attention"]
    mlp = [l.params for l in w.layers if l.kind == "mlp"]
    emb = sum(l.params for l in w.layers if l.kind == "embedding")
    d = int(sh["hidden"])
    return Shape(name=w.name, layers=int(sh["layers"]), d=d, heads=int(sh["heads"]),
                 kv_heads=int(sh.get("kv_heads") or sh["heads"]), ffn=float(sh["ffn_mult"]) * d,
                 vocab=int(sh["vocab"]), context=int(sh["seq"]), b=int(w.dtype_bytes),
                 attn_params=attn[0], mlp_params=mlp[0], embed_params=float(emb))


@dataclass(frozen=True)
class Block:
    """One NPU's work on one block for one step: FLOPs, HBM bytes, and the MP All-Reduce bytes
    that follow it (per NPU buffer)."""

    flops: float
    bytes: float
    allreduce: float

    def time(self, npu: NpuParams) -> float:
        return max(self.flops / npu.flops, self.bytes / npu.hbm_bw)


def _attn_act(sh: Shape, a: int) -> float:
    """Activation bytes per token of the attention block on one NPU: its input and output (d
    each), Q, K and V written and read back, the attention output written and read by the
    projection."""
    q, kv = sh.d / a, sh.kv_heads_per_npu(a) * sh.d_head
    return sh.b * (2 * sh.d + 2 * (q + 2 * kv) + 2 * q)


def decode_blocks(sh: Shape, a: int, batch: int, context: float) -> tuple[Block, Block]:
    """(attention, MLP) of one decode step: ``batch`` new tokens, each attending ``context``
    tokens of its sequence (the cache read, the new entry written)."""
    b, d, B = sh.b, sh.d, batch
    attn = Block(flops=B * (2 * sh.attn_params / a + 4 * context * d / a),
                 bytes=sh.attn_params * b / a + B * (context + 1) * sh.kv_bytes(a) + B * _attn_act(sh, a),
                 allreduce=B * d * b)
    mlp = Block(flops=2 * B * sh.mlp_params / a,
                bytes=sh.mlp_params * b / a + B * b * (2 * d + 2 * sh.ffn / a),
                allreduce=B * d * b)
    return attn, mlp


def prefill_blocks(sh: Shape, a: int, batch: int, prompt: int) -> tuple[Block, Block]:
    """(attention, MLP) of the prefill of ``batch`` prompts of ``prompt`` tokens."""
    b, d = sh.b, sh.d
    T = batch * prompt
    causal = prompt * (prompt + 1) / 2                      # (query, key) pairs per sequence
    attn = Block(flops=2 * T * sh.attn_params / a + 4 * batch * causal * d / a,
                 bytes=sh.attn_params * b / a + 2 * T * sh.kv_bytes(a) + T * _attn_act(sh, a),
                 allreduce=T * d * b)
    mlp = Block(flops=2 * T * sh.mlp_params / a,
                bytes=sh.mlp_params * b / a + T * b * (2 * d + 2 * sh.ffn / a),
                allreduce=T * d * b)
    return attn, mlp


def head_block(sh: Shape, a: int, batch: int) -> Block:
    """The output head for the last position of ``batch`` sequences on the last stage (the tied
    ``V x d`` matrix split over the vocabulary), then the sampling reduce over MP."""
    return Block(flops=2 * batch * sh.d * sh.vocab / a,
                 bytes=sh.vocab * sh.d * sh.b / a + batch * sh.vocab * 4 / a,   # fp32 logits written
                 allreduce=batch * ARGMAX_BYTES)


def stage_layers(sh: Shape, c: int) -> list[int]:
    """Transformer layers per pipeline stage: ``layers / c``, the first stages one more when it
    does not divide."""
    base, extra = divmod(sh.layers, c)
    return [base + (1 if s < extra else 0) for s in range(c)]


def memory_per_npu(sh: Shape, abc, batch: int, prompt: int, output: int) -> dict:
    """Bytes per NPU of the fullest pipeline stage: ``weights``, ``kv_cache`` (every sequence at
    its full length), ``working`` (the prefill's largest block activations), ``total``."""
    a, _, c = abc
    per = stage_layers(sh, c)
    tokens = batch * (prompt + output)
    head = sh.vocab * sh.d * sh.b / a
    best = None
    for s, n in enumerate(per):
        weights = n * (sh.attn_params + sh.mlp_params) * sh.b / a
        if s == 0:
            weights += sh.embed_params * sh.b / a        # the embedding (and, tied, the head if c == 1)
        elif s == c - 1:
            weights += head                               # the last stage's copy of the tied head
        kv = n * tokens * sh.kv_bytes(a)
        working = batch * prompt * sh.b * (2 * sh.d + 2 * sh.ffn / a)
        m = {"weights": weights, "kv_cache": kv, "working": working, "total": weights + kv + working}
        if best is None or m["total"] > best["total"]:
            best = m
    return best


def check_memory(sh: Shape, abc, batch: int, prompt: int, output: int, npu: NpuParams, strategy: str) -> dict:
    """:func:`memory_per_npu`, or one FredError line naming the figures when it exceeds HBM."""
    m = memory_per_npu(sh, abc, batch, prompt, output)
    if m["total"] > npu.hbm_capacity:
        raise FredError(f"{sh.name} {strategy}, batch {batch} x {prompt + output} tokens does not fit in HBM: "
                        f"weights {m['weights'] / 1e9:.1f} GB + KV cache {m['kv_cache'] / 1e9:.1f} GB + working set "
                        f"{m['working'] / 1e9:.1f} GB = {m['total'] / 1e9:.1f} GB per NPU > "
                        f"{npu.hbm_capacity / 1e9:g} GB")
    return m
