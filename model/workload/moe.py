"""Decoder transformers of the Llama / Mixtral / DeepSeek family: grouped-query attention,
gated (SwiGLU) feed-forward blocks, untied embeddings and mixture-of-experts (MoE) blocks, and
the token routing of an MoE layer.

A workload file of ``kind: transformer`` takes this derivation when it gives any of the fields
of :data:`fred.model.workload.fields.MODERN_FIELDS` (``kv_heads``, ``gated_ffn``, ``ffn_hidden``,
``tied_embeddings``, ``experts``, ...); without them it is the Megatron-LM GPT derivation of
:func:`fred.model.workload.loader.transformer_layers` (unchanged). The fields, per layer (``d`` hidden,
``h`` heads, ``g`` KV heads, ``dh = d / h``, ``s`` tokens per sample, ``b`` bytes per value):

* attention (``kind: attention``): Q and the output projection ``d x d`` each, K and V
  ``d x g dh`` each (grouped-query attention, Ainslie et al., EMNLP 2023; ``g = h`` is
  multi-head attention), no biases, an RMS norm (``d``); forward FLOPs
  ``2 s (2 d^2 + 2 d g dh) + 4 s^2 d``; saved activations as Korthikanti et al. (MLSys 2023,
  Sec. 4.1) with K and V ``g dh`` wide;
* dense feed-forward (``kind: mlp``): gated (SwiGLU, Shazeer 2020: three ``d x f`` matrices,
  ``6 s d f`` FLOPs) or not (two, ``4 s d f``), ``f`` = ``ffn_hidden`` (or ``ffn_mult x d``);
* MoE block (with ``experts``), every ``moe_layer_every``-th layer after the first ``first_dense_layers``: a router
  (``d x E``) and the ``shared_experts`` (always active, ``shared_experts x expert_ffn_hidden``
  wide, DeepSeekMoE) as one layer (``kind: moe``), then the routed experts (``kind: experts``,
  ``E`` experts of ``expert_ffn_hidden`` each; every token visits ``experts_per_token`` of
  them). The experts layer carries ``a2a_bytes``: the bytes of one sample's tokens dispatched to
  their experts (``s x k x kept x d x b``; the combine returns as many); the schedule moves
  them with all-to-alls over the expert-parallel group (:mod:`fred.model.schedule.iteration`). Its
  ``expert_params`` are what expert parallelism splits.

Routing (:func:`routing`): expert popularity follows a Zipf law of exponent ``routing_zipf``
(default :data:`DEFAULT_ROUTING_ZIPF` = 1.0: the pattern issue 23 takes for MoE token routing,
and the one the switch benches measure the skewed all-to-all with -- ours, not a published
routing statistic; ``routing_zipf: 0`` is perfectly balanced routing). An expert takes a token
at most once, so at most 1/``experts_per_token`` of the token slots. Optionally each expert
takes at most ``capacity_factor`` x its even share and the rest is dropped (passes on through
the residual connection), as in the Switch Transformer (Fedus et al., JMLR 2022, Sec. 2.2; 1.25
is its usual training value, Table 1); default none: no token is dropped. Experts sit on the EP
ranks round-robin (expert ``i`` on rank ``i mod EP``), the most popular one on rank 0: that rank
is the busiest, its share sets the experts' compute and the all-to-all's busiest port.
"""

from __future__ import annotations

from dataclasses import dataclass

from fred import FredError

#: Zipf exponent of expert popularity (issue 23: the pattern MoE token routing produces; the
#: exponent the switch benches measure the skewed all-to-all at)
DEFAULT_ROUTING_ZIPF = 1.0
#: tokens an expert takes at most, x its even share (None: no capacity, no token dropped)
DEFAULT_CAPACITY_FACTOR = None
#: Korthikanti et al. (MLSys 2023), Sec. 4.1: dropout masks take one byte per element
MASK_BYTES = 1


@dataclass(frozen=True)
class Routing:
    """Where an MoE layer's tokens go: ``loads[i]`` = the share of token slots expert ``i``
    takes (popularity order; sums to :attr:`kept` <= 1, the rest dropped by the capacity)."""
    experts: int
    per_token: int
    zipf: float
    capacity_factor: float | None
    loads: tuple

    @property
    def kept(self) -> float:
        return float(sum(self.loads))

    def rank_loads(self, ep: int) -> list[float]:
        """Share of all token slots that each of ``ep`` ranks takes (round-robin placement)."""
        if ep < 1 or self.experts % ep:
            raise FredError(f"EP({ep}) must divide the {self.experts} experts")
        out = [0.0] * ep
        for i, x in enumerate(self.loads):
            out[i % ep] += x
        return out

    def imbalance(self, ep: int) -> float:
        """The busiest of ``ep`` ranks' tokens over the mean rank's (1 = balanced; 1 at EP(1))."""
        r = self.rank_loads(ep)
        return ep * max(r) / sum(r) if sum(r) > 0 else 1.0


def routing(experts: int, per_token: int, zipf: float = DEFAULT_ROUTING_ZIPF,
            capacity_factor: float | None = DEFAULT_CAPACITY_FACTOR) -> Routing:
    """Expert loads under Zipf popularity ``zipf``: a token's ``per_token`` choices are distinct
    experts, so an expert takes at most 1/``per_token`` of the slots and what a popular expert
    cannot take goes to the others in proportion to their popularity (no token lost). With
    ``capacity_factor`` an expert takes at most that x its even share and the excess is dropped."""
    w = [1.0 / (i + 1) ** zipf for i in range(experts)]
    loads = [0.0] * experts
    free, room = list(range(experts)), 1.0
    while free:                      # water-filling: fix the experts the 1/k limit binds
        tot = sum(w[i] for i in free)
        over = [i for i in free if w[i] / tot * room > 1.0 / per_token]
        if not over:
            for i in free:
                loads[i] = w[i] / tot * room
            break
        for i in over:
            loads[i] = 1.0 / per_token
        room -= len(over) / per_token
        free = [i for i in free if i not in over]
    if capacity_factor is not None:
        loads = [min(x, capacity_factor / experts) for x in loads]
    return Routing(experts, per_token, float(zipf), capacity_factor, tuple(loads))


def modern_layers(shape: dict, b: int, layer_cls) -> list:
    """The layers (``layer_cls`` = :class:`fred.model.workload.loader.Layer`) of a decoder transformer
    of ``shape`` (the checked fields; see the module docs)."""
    L, d, h, s, V = shape["layers"], shape["hidden"], shape["heads"], shape["seq"], shape["vocab"]
    g = shape["kv_heads"]
    dh = d // h
    kv = g * dh
    f = shape["ffn_hidden"]
    mats = 3 if shape["gated_ffn"] else 2
    mk = MASK_BYTES
    out = [layer_cls("embedding", "embedding", 0.0, 0.0, V * d, s * d * b, 2 * s * d * b, 1, 0,
                     saved_bytes=s * d * mk)]
    attn_params = 2 * d * d + 2 * d * kv + d
    attn_flops = 2 * s * (2 * d * d + 2 * d * kv) + 4 * s * s * d
    attn_mem = (2 * s * d + 2 * s * d + 2 * s * kv + 4 * h * s * s) * b
    attn_split = (2 * s * d + 2 * s * kv + 4 * h * s * s) * b / attn_mem
    core_saved = (2 * b + mk) * h * s * s
    attn_saved_split = b * s * (2 * d + 2 * kv) + core_saved
    attn_saved = (2 * b + mk) * s * d + attn_saved_split

    def ffn(name, kind, width, tokens, mp_ar):
        """A feed-forward block ``width`` wide over ``tokens`` token visits per sample."""
        mem = (2 * tokens * d + mats * tokens * width) * b
        split = mats * b * tokens * width
        return layer_cls(name, kind, 2 * mats * tokens * d * width, 4 * mats * tokens * d * width,
                         mats * d * width, s * d * b, mem, mp_ar, mp_ar, mem_split=split / mem if mem else 0.0,
                         saved_bytes=(b + mk) * s * d + b * tokens * d + split, saved_split=split)

    E = shape.get("experts") or 0
    for i in range(L):
        out.append(layer_cls(f"layer{i}.attn", "attention", attn_flops, 2 * attn_flops, attn_params, s * d * b,
                             attn_mem, 1, 1, mem_split=attn_split, saved_bytes=attn_saved,
                             saved_split=attn_saved_split, core_saved=core_saved, core_flops=4 * s * s * d,
                             core_mem_bytes=4 * h * s * s * b))
        if not E or not is_moe_layer(shape, i):
            l = ffn(f"layer{i}.mlp", "mlp", f, s, 1)
            out.append(_replace(l, params=l.params + d))
            continue
        r = routing(E, shape["experts_per_token"], shape["routing_zipf"], shape["capacity_factor"])
        fe = shape["expert_ffn_hidden"]
        shared = shape["shared_experts"]
        # router (d x E, its logits) and the shared experts: every token, split over MP as an MLP
        router_flops = 2 * s * d * E
        if shared:
            sh = ffn(f"layer{i}.moe", "moe", shared * fe, s, 0)
            out.append(_replace(sh, fwd_flops=sh.fwd_flops + router_flops, bwd_flops=sh.bwd_flops + 2 * router_flops,
                                params=sh.params + d * E + d))
        else:
            out.append(layer_cls(f"layer{i}.moe", "moe", router_flops, 2 * router_flops, d * E + d, s * d * b,
                                 (2 * s * d + 2 * s * E) * b, 0, 0, mem_split=0.0,
                                 saved_bytes=b * s * d + b * s * E, saved_split=0.0))
        tokens = s * r.per_token * r.kept
        ex = ffn(f"layer{i}.experts", "experts", fe, tokens, 1)
        out.append(_replace(ex, params=E * ex.params, expert_params=E * ex.params, a2a_bytes=tokens * d * b))
    out.append(layer_cls("logits", "logits", 2 * s * d * V, 4 * s * d * V,
                         d + (0 if shape["tied_embeddings"] else V * d), s * d * b, (s * d + 2 * s * V) * b, 0, 1,
                         mem_split=2 * V / (d + 2 * V), saved_bytes=2 * b * s * d + b * s * V, saved_split=b * s * V))
    return out


def is_moe_layer(shape: dict, i: int) -> bool:
    """Layer ``i`` (0-based) has an MoE block: after the first ``first_dense_layers``, every
    ``moe_layer_every``-th layer (the last of each run of ``moe_layer_every``)."""
    k = i - shape["first_dense_layers"]
    return k >= 0 and (k + 1) % shape["moe_layer_every"] == 0


def _replace(layer, **kw):
    from dataclasses import replace

    return replace(layer, **kw)
