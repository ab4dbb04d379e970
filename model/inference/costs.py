"""What one NPU computes, reads and holds when a decoder transformer serves requests.

A serving step runs the workload's layers as training's forward pass derives them
(:mod:`fred.model.workload.loader`: the embedding, per transformer layer an attention and a feed-forward
block, the output head), each followed by the Megatron tensor-parallel (MP) All-Reduces the
layer's ``mp_ar_fwd`` says (the vocabulary-parallel embedding, the attention and the MLP block;
Shoeybi et al. 2019). Per NPU of an MP(a) group, for ``T`` tokens of a replica (``batch`` in a
decode step, ``batch x prompt`` in the prefill):

* weights: the layer's parameters split over MP, read once per step;
* attention: Megatron splits it by heads; when MP does not divide them the busiest NPU holds
  ``ceil(heads / a)`` of them (and of the key/value heads, one at least: replicated when MP
  exceeds them), and its weights, FLOPs and cache are that share; each token attends to its
  sequence's context: ``4 x context x d_head`` FLOPs per head (scores and weighted sum) and, in
  decode, the context's key/value cache read from HBM: ``context x 2 x d_head x bytes`` per
  key/value head and layer;
* the prefill writes the prompt's key/value cache and computes the causal attention core
  (``prompt (prompt + 1) / 2`` query-key pairs per sequence) without materialising the scores
  (FlashAttention, Dao et al., NeurIPS 2022): its HBM traffic is the weights, the cache written
  and the activations that enter and leave each matrix product;
* other blocks: ``2 T x parameters / a`` FLOPs and the activation traffic training derives for
  the block (per token, the MP-split part divided by MP);
* MoE blocks (:mod:`fred.model.workload.moe`): the router and shared experts as an MLP block;
  the routed experts under EP(e) on the busiest EP rank (round-robin placement, the most popular
  expert on rank 0): FLOPs of its experts' token visits (the EP group's ``e x T`` tokens, each
  visiting ``experts_per_token`` experts at the workload's Zipf routing), split over MP; the
  weights read are those of the rank's experts that at least one of the group's tokens visits
  (ours: expected count, each token picking expert ``i`` independently with probability
  ``experts_per_token x load_i``; at most all the rank's experts: batch-1 decode reads about one
  or two experts per rank, a large batch all of them), plus the dispatch and combine
  all-to-all bytes;
* the output head runs for the last position of each sequence only: ``2 d V / a`` FLOPs and the
  ``V x d`` matrix read on the last stage (tied to the embedding or not), then the sampling
  reduce over MP (each member's best logit and its token id).

Time of a block: the NPU roofline of :mod:`fred.model.workload.compute`,
``max(FLOPs / (peak x utilisation), bytes / HBM bandwidth)``; decode at small batches is
memory-bound, its time the bytes at the NPU's HBM bandwidth.

Memory per NPU (checked against the NPU's HBM before anything is simulated): the stage's weight
share (every routed expert on its EP rank: 1/(MP x EP) of an experts layer) (the last stage also holds a copy of a tied head when the pipeline has several stages), the
key/value cache of ``batch x (prompt + output)`` tokens, and the prefill working set (one block's
activations).
"""

from __future__ import annotations

from dataclasses import dataclass

from fred import FredError

from fred.model.workload import compute

__all__ = ["Shape", "Block", "shape_of", "block", "stage_layers", "memory_per_npu", "check_memory",
           "MAX_BATCH", "MAX_TOKENS", "TOKEN_BYTES", "ARGMAX_BYTES"]

#: most sequences per replica, prompt and output tokens (a step costs the same to simulate at
#: any size; beyond these the cache of one NPU exceeds every HBM preset many times over)
MAX_BATCH = 65_536
MAX_TOKENS = 2**20
#: bytes of a token id handed from the last pipeline stage back to the first (int32)
TOKEN_BYTES = 4
#: bytes each MP member contributes to the sampling reduce over a vocabulary-parallel output
#: head: the best logit (fp32) and its token id (int32) per sequence (greedy sampling)
ARGMAX_BYTES = 8
#: the kinds of layer a serving step runs as blocks of a transformer layer (``moe``: an MoE
#: block's router and shared experts; ``experts``: its routed experts, :mod:`fred.model.workload.moe`)
BLOCK_KINDS = ("attention", "mlp", "moe", "experts")


@dataclass(frozen=True)
class Shape:
    """A decoder transformer's serving shape (from a workload of kind ``transformer``)."""

    name: str
    layers: tuple           # the workload's layers (fred.model.workload.loader.Layer)
    units: tuple            # per transformer layer, its blocks (attention, feed-forward)
    d: int
    heads: int
    kv_heads: int
    vocab: int
    context: int            # the model's context window (the workload's seq)
    b: int                  # bytes per value
    ep: int = 1             # expert parallelism: the routed experts of an MoE layer over EP ranks
    routing: object = None  # the MoE token routing (fred.model.workload.moe.Routing), or None

    @property
    def is_moe(self) -> bool:
        return self.routing is not None

    def rank_experts(self) -> list[int]:
        """The experts the busiest EP rank holds (round-robin placement, the most popular on
        rank 0: :mod:`fred.model.workload.moe`)."""
        return list(range(0, self.routing.experts, self.ep))

    def expert_tokens(self, tokens: float) -> float:
        """Token visits the busiest EP rank's experts take when each of its ``tokens`` tokens (and
        as many on every other rank of the EP group) visits ``experts_per_token`` experts."""
        r = self.routing
        return self.ep * tokens * r.per_token * sum(r.loads[i] for i in self.rank_experts())

    def active_experts(self, tokens: float) -> float:
        """Expected experts of the busiest EP rank that at least one of the EP group's
        ``ep x tokens`` tokens visits (each token picks expert ``i`` with probability
        ``experts_per_token x load_i``, independently of the other tokens): the experts whose
        weights a step reads; at most all the rank's experts."""
        r = self.routing
        n = self.ep * tokens
        return sum(1.0 - (1.0 - min(1.0, r.per_token * r.loads[i])) ** n for i in self.rank_experts())

    def a2a_bytes(self, tokens: float) -> float:
        """Bytes one NPU sends in a dispatch (the combine returns as many) for its ``tokens``
        tokens: ``tokens x experts_per_token x kept x d x b`` (the experts layer's ``a2a_bytes``)."""
        r = self.routing
        return tokens * r.per_token * r.kept * self.d * self.b

    @property
    def d_head(self) -> int:
        return self.d // self.heads

    def kv_heads_per_npu(self, a: int) -> int:
        """Key/value heads the busiest NPU of MP(a) holds: ``ceil(kv_heads / a)`` (one, replicated,
        when a > kv_heads)."""
        return -(-self.kv_heads // a)

    def attention_share(self, a: int) -> float:
        """The busiest NPU's share of an attention block under MP(a): ``ceil(heads / a) / heads``."""
        return -(-self.heads // a) / self.heads

    def kv_bytes(self, a: int) -> float:
        """Key/value cache bytes per token and layer on one NPU of MP(a)."""
        return 2 * self.kv_heads_per_npu(a) * self.d_head * self.b

    @property
    def embedding(self):
        return next(l for l in self.layers if l.kind == "embedding")

    @property
    def head(self):
        return next(l for l in self.layers if l.kind == "logits")

    @property
    def tied(self) -> bool:
        """The output head shares the embedding's ``V x d`` matrix (its own parameters are less)."""
        return self.head.params < self.vocab * self.d


def shape_of(w, ep: int = 1) -> Shape:
    """The serving shape of workload ``w`` (a :class:`fred.model.workload.loader.Workload`) with its
    MoE layers' experts over ``ep`` EP ranks; a workload of another kind, or with layers a serving
    step does not model, or EP over a dense model or not dividing the experts, is one FredError
    line naming it."""
    if w.kind != "transformer":
        raise FredError(f"workload {w.name} is a {w.kind} model: fred infer serves decoder transformers")
    units, cur = [], None
    for l in w.layers:
        if l.kind == "attention":
            cur = [l]
            units.append(cur)
        elif l.kind in BLOCK_KINDS and cur is not None:
            cur.append(l)
        elif l.kind not in ("embedding", "logits"):
            raise FredError(f"workload {w.name}: layer {l.name} of kind {l.kind!r} is not modelled by fred infer "
                            f"(it serves {', '.join(BLOCK_KINDS)} blocks)")
    if ep > 1 and not w.is_moe:
        raise FredError(f"EP({ep}) needs a mixture-of-experts workload; {w.name} has no experts")
    if w.is_moe and w.experts % ep:
        raise FredError(f"EP({ep}) must divide the {w.experts} experts of {w.name}")
    sh = w.shape
    return Shape(name=w.name, layers=tuple(w.layers), units=tuple(tuple(u) for u in units), d=int(sh["hidden"]),
                 heads=int(sh["heads"]), kv_heads=int(sh.get("kv_heads") or sh["heads"]), vocab=int(sh["vocab"]),
                 context=int(sh["seq"]), b=int(w.dtype_bytes), ep=int(ep), routing=w.routing)


@dataclass(frozen=True)
class Block:
    """One NPU's work on one layer for one step: FLOPs, HBM bytes (``weights`` of them the
    weights read), the ``count`` MP All-Reduces of ``allreduce`` bytes (per NPU buffer) that follow
    it, and (an experts block) the ``a2a`` bytes per NPU of its dispatch all-to-all before it and
    of its combine after it, over the EP group, whose busiest port carries ``skew`` x an even share."""

    flops: float
    bytes: float
    allreduce: float = 0.0
    count: int = 0
    weights: float = 0.0
    a2a: float = 0.0
    skew: float = 1.0

    def time(self, npu: compute.NpuParams) -> float:
        return max(self.flops / npu.flops, self.bytes / npu.hbm_bw)


def _attn_act(sh: Shape, a: int) -> float:
    """Activation bytes per token of the attention block on one NPU: its input and output (d
    each), Q, K and V written and read back, the attention output written and read by the
    projection."""
    q, kv = sh.d * sh.attention_share(a), sh.kv_heads_per_npu(a) * sh.d_head
    return sh.b * (2 * sh.d + 2 * (q + 2 * kv) + 2 * q)


def block(sh: Shape, layer, a: int, batch: int, tokens: int, context: float) -> Block:
    """``layer`` on one NPU of MP(a) for ``batch`` sequences of ``tokens`` new tokens each:
    ``tokens`` = 1 and ``context`` = the tokens attended in a decode step; ``tokens`` = the prompt
    (``context`` unused) in the prefill."""
    b, d = sh.b, sh.d
    T = batch * tokens
    ar = T * d * b
    n = int(layer.mp_ar_fwd) if a > 1 else 0
    w = layer.params * b / a
    share = sh.attention_share(a)
    if layer.kind == "attention":
        if tokens == 1:                                  # decode: read the cache, write one entry
            pairs, kv = batch * context, batch * (context + 1) * sh.kv_bytes(a)
        else:                                            # prefill: causal, the cache written
            pairs, kv = batch * tokens * (tokens + 1) / 2, 2 * T * sh.kv_bytes(a)
        flops = 2 * T * layer.params * share + 4 * pairs * d * share
        return Block(flops, layer.params * b * share + kv + T * _attn_act(sh, a), ar, n, layer.params * b * share)
    if layer.kind == "embedding":                        # a row per token, read and written
        return Block(0.0, 2 * T * d * b, ar, n)
    if layer.kind == "logits":                           # the last position of each sequence
        head = sh.vocab * d * b / a
        return Block(2 * batch * d * sh.vocab / a, head + batch * sh.vocab * 4 / a, batch * ARGMAX_BYTES,
                     1 if a > 1 else 0, head)
    split = layer.mem_split if layer.mem_split is not None else 0.0
    per_token = layer.fwd_mem_bytes / (layer.act_bytes / (d * b)) if layer.act_bytes else 0.0
    if layer.kind == "experts" and sh.is_moe:
        # the busiest EP rank: its experts' token visits (per_token counts a token's k visits:
        # scale to one visit), the weights of the experts those visits activate, split over MP
        r = sh.routing
        visits = sh.expert_tokens(T)
        one = layer.params / r.experts                  # one expert's parameters
        w = sh.active_experts(T) * one * b / a
        act = visits * per_token / (r.per_token * r.kept) * ((1 - split) + split / a)
        return Block(2 * visits * one / a, w + act, ar, n, w, sh.a2a_bytes(T), sh.routing.imbalance(sh.ep))
    act = T * per_token * ((1 - split) + split / a)
    return Block(2 * T * layer.params / a, w + act, ar, n, w)


def stage_layers(sh: Shape, c: int) -> list[int]:
    """Transformer layers per pipeline stage: ``layers / c``, the first stages one more when it
    does not divide."""
    base, extra = divmod(len(sh.units), c)
    return [base + (1 if s < extra else 0) for s in range(c)]


def memory_per_npu(sh: Shape, abc, batch: int, prompt: int, output: int) -> dict:
    """Bytes per NPU of the fullest pipeline stage: ``weights``, ``kv_cache`` (every sequence at
    its full length), ``working`` (the prefill's largest block activations), ``total``."""
    a, _, c = abc
    tokens = batch * (prompt + output)
    working = max(blk.bytes - blk.weights for blk in (block(sh, l, a, batch, prompt, 0) for u in sh.units
                                                       for l in u[1:])) if any(len(u) > 1 for u in sh.units) else 0.0
    share = sh.attention_share(a)
    best, first = None, 0
    for s, n in enumerate(stage_layers(sh, c)):
        mine = sh.units[first:first + n]
        first += n
        weights = sum(l.params * (share if l.kind == "attention" else 1 / (a * sh.ep) if l.kind == "experts"
                                  else 1 / a) for u in mine for l in u) * sh.b
        if s == 0:
            weights += sh.embedding.params * sh.b / a
        if s == c - 1:
            weights += (sh.head.params + (sh.vocab * sh.d if sh.tied and c > 1 else 0)) * sh.b / a
        kv = n * tokens * sh.kv_bytes(a)
        m = {"weights": weights, "kv_cache": kv, "working": working, "total": weights + kv + working}
        if best is None or m["total"] > best["total"]:
            best = m
    return best


def check_memory(sh: Shape, abc, batch: int, prompt: int, output: int, npu: compute.NpuParams, strategy: str) -> dict:
    """:func:`memory_per_npu`, or one FredError line naming the figures when it exceeds HBM."""
    m = memory_per_npu(sh, abc, batch, prompt, output)
    if m["total"] > npu.hbm_capacity:
        raise FredError(f"{sh.name} {strategy}, batch {batch} x {prompt + output} tokens does not fit in HBM: "
                        f"weights {m['weights'] / 1e9:.1f} GB + KV cache {m['kv_cache'] / 1e9:.1f} GB + working set "
                        f"{m['working'] / 1e9:.1f} GB = {m['total'] / 1e9:.1f} GB per NPU > "
                        f"{npu.hbm_capacity / 1e9:g} GB")
    return m
