"""Training workloads: loading, validation and per-layer derivation.

Each workload is a YAML file in ``model/data/`` that cites its source and gives either a
published shape (transformers: layers, hidden size, heads, sequence length, vocabulary; ResNet:
stem, bottleneck stages) from which the layers are derived here, or an explicit ``layer_list``.

Per layer (per training *sample*, i.e. one image or one sequence) we derive:

* ``fwd_flops`` / ``bwd_flops`` -- forward and backward FLOPs (backward = input gradient +
  weight gradient = 2x forward for matrix products and convolutions);
* ``params`` -- parameter count (bytes = params x ``dtype_bytes``);
* ``act_bytes`` -- bytes of the layer's output activation (what crosses a PP boundary, and the
  size of a Megatron MP All-Reduce after the layer);
* ``fwd_mem_bytes`` -- activation bytes read + written in forward (HBM traffic for the
  roofline; backward traffic is taken as 2x forward);
* ``mp_ar_fwd`` / ``mp_ar_bwd`` -- MP All-Reduces after the layer in forward / backward;
* ``mem_split`` -- the share of ``fwd_mem_bytes`` that Megatron MP splits over the MP group
  (None: a per-kind default in :mod:`fred.model.workload.compute`); transformers derive it from the
  shape: everything but the block's replicated input and output;
* ``saved_bytes`` / ``saved_split`` -- activation bytes the backward pass needs when nothing is
  recomputed, and the part of them Megatron MP splits (:mod:`fred.model.workload.memory`);
* ``core_saved`` / ``core_flops`` / ``core_mem_bytes`` -- the attention core (scores, softmax,
  dropout, attention over V): its share of ``saved_bytes``, its forward FLOPs and HBM traffic,
  i.e. what selective recomputation drops and redoes (Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models", MLSys 2023, Sec. 4-5).

Transformers follow Megatron-LM (Shoeybi et al. 2019; Narayanan et al. SC'21): every layer is
an attention block (4d^2 + 6d params; 8sd^2 + 4s^2d forward FLOPs) and an MLP block
(8d^2 + 7d params; 16sd^2 FLOPs), each followed by one All-Reduce in forward and one in
backward -- 2 + 2 per layer; embeddings (V d + s d) are tied with the output logits
(2 s d V forward FLOPs).

A transformer file that gives any of the fields of Llama/Mixtral/DeepSeek-style models
(``kv_heads``, ``gated_ffn``, ``ffn_hidden``, ``tied_embeddings``, ``experts``,
``experts_per_token``, ``expert_ffn_hidden``, ...; :data:`fred.model.workload.fields.MODERN_FIELDS`)
is derived by :mod:`fred.model.workload.moe` instead: grouped-query attention, gated FFNs and
mixture-of-experts blocks (the bundled ``mixtral-8x7b`` and ``deepseek-moe-16b``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from fred import FredError
from fred.contract.inputs import decode_text, display_name, input_problem, read_input

from fred.model.network import NumberLoader
from fred.model.collectives import parse_strategy
from .fields import (MODERN_FIELDS, check_layer_list, check_modern_shape, check_resnet_shape,
                     check_sweep_microbatches, get_field, layer_entry)
from .moe import modern_layers, routing

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
#: Korthikanti et al. (MLSys 2023), Sec. 4.1: dropout masks take one byte per element
MASK_BYTES = 1
MODES = ("weight-stationary", "weight-streaming")
#: largest workload file read (the bundled ones are ~2 KB)
MAX_FILE_BYTES = 2**20


@dataclass(frozen=True)
class Layer:
    name: str
    kind: str
    fwd_flops: float          # per sample
    bwd_flops: float          # per sample
    params: float
    act_bytes: float          # output activation bytes per sample
    fwd_mem_bytes: float      # activation bytes read + written in forward, per sample
    mp_ar_fwd: int = 0
    mp_ar_bwd: int = 0
    mem_split: float | None = None     # None: per-kind default (fred.model.workload.compute)
    saved_bytes: float | None = None   # None: the output activation (act_bytes)
    saved_split: float = 0.0
    core_saved: float = 0.0
    core_flops: float = 0.0
    core_mem_bytes: float = 0.0
    expert_params: float = 0.0         # of params: routed experts' (split over EP; fred.model.workload.moe)
    a2a_bytes: float = 0.0             # bytes per sample dispatched to the experts (combine: as many)


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    source: str
    kind: str
    layers: tuple
    dtype_bytes: int
    input_bytes_per_sample: float
    mode: str
    strategy: str
    microbatches: int
    samples_per_replica: float
    published_params: float | None = None
    sweep_microbatches: object = None
    shape: dict = field(default_factory=dict)
    path: str = ""
    #: expert parallelism this view of the workload is laid out for (:meth:`with_expert_parallel`)
    expert_parallel: int = 1

    @property
    def params(self) -> float:
        return sum(l.params for l in self.layers)

    @property
    def param_bytes(self) -> float:
        return self.params * self.dtype_bytes

    @property
    def fwd_flops(self) -> float:
        """Forward FLOPs per sample."""
        return sum(l.fwd_flops for l in self.layers)

    @property
    def bwd_flops(self) -> float:
        return sum(l.bwd_flops for l in self.layers)

    @property
    def experts(self) -> int:
        """Routed experts per MoE layer (0: a dense model)."""
        return int(self.shape.get("experts") or 0)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def routing(self):
        """The token routing of an MoE layer (:func:`fred.model.workload.moe.routing`), or None."""
        if not self.is_moe:
            return None
        sh = self.shape
        return routing(sh["experts"], sh["experts_per_token"], sh["routing_zipf"], sh["capacity_factor"])

    @property
    def active_params(self) -> float:
        """Parameters one token uses (all but the routed experts it does not visit)."""
        r = self.routing
        if r is None:
            return self.params
        return self.params - sum(l.expert_params for l in self.layers) * (1 - r.per_token / r.experts)

    def expert_imbalance(self, ep: int | None = None) -> float:
        """The busiest EP rank's expert tokens over the mean rank's (1 for a dense model or EP(1))."""
        ep = self.expert_parallel if ep is None else ep
        r = self.routing
        return 1.0 if r is None or ep <= 1 else r.imbalance(ep)

    def with_expert_parallel(self, ep: int) -> "Workload":
        """The workload as one NPU of an EP(``ep``) group sees it: every experts layer holds
        1/``ep`` of the experts (its parameters / ``ep``) and does the busiest rank's share of
        the expert work (FLOPs, activation traffic and stored activations x
        :meth:`expert_imbalance`; 1 at balanced routing). Refuses (FredError) EP(``ep``) for a
        dense workload and one that does not divide the experts."""
        if ep == self.expert_parallel:
            return self
        if self.expert_parallel != 1:
            raise FredError(f"{self.name}: already laid out for EP({self.expert_parallel})")
        if ep < 1:
            raise FredError(f"EP({ep}) must be >= 1")
        if ep > 1 and not self.is_moe:
            raise FredError(f"EP({ep}) needs a mixture-of-experts workload; {self.name} has no experts")
        if ep > 1 and self.experts % ep:
            raise FredError(f"EP({ep}) must divide the {self.experts} experts of {self.name}")
        k = self.expert_imbalance(ep)
        layers = []
        for l in self.layers:
            if l.expert_params:
                l = replace(l, params=l.params / ep, expert_params=l.expert_params / ep, fwd_flops=l.fwd_flops * k,
                            bwd_flops=l.bwd_flops * k, fwd_mem_bytes=l.fwd_mem_bytes * k,
                            saved_bytes=None if l.saved_bytes is None else l.saved_bytes * k,
                            saved_split=l.saved_split * k)
            layers.append(l)
        return replace(self, layers=tuple(layers), expert_parallel=ep)

    def with_mode(self, mode: str) -> "Workload":
        return replace(self, mode=_check_mode(mode, self.name))


def _check_mode(mode, where):
    m = str(mode).strip().lower().replace("_", "-")
    m = {"stationary": "weight-stationary", "ws": "weight-stationary", "streaming": "weight-streaming",
         "stream": "weight-streaming"}.get(m, m)
    if m not in MODES:
        raise FredError(f"{where}: unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    return m


# ---- derivations -------------------------------------------------------------------------------

def transformer_layers(L: int, d: int, heads: int, s: int, V: int, ffn_mult: float = 4,
                       dtype_bytes: int = 2, kv_heads: int | None = None) -> list[Layer]:
    """Megatron-LM layers of a decoder transformer (per sample = one sequence of ``s`` tokens).

    Activations saved for backward (Korthikanti et al., MLSys 2023, Sec. 4.1, there with 2-byte
    values and 1-byte dropout masks: 34 s h + 5 a s^2 bytes per layer and sequence, of which
    24 s h + 5 a s^2 are split by tensor (MP) parallelism): attention block = layer-norm input,
    QKV input and output-dropout mask (replicated); Q, K, V, projection input, and the core's
    softmax output, its dropout mask and output (split); MLP block = layer-norm input, fc1
    input, dropout mask (replicated); GeLU input and output (split).

    ``kv_heads`` (grouped-query attention, Ainslie et al. 2023; default ``heads``): K and V are
    ``kv_heads x d/heads`` wide each, which shrinks the QKV weights and FLOPs; the activation
    accounting keeps Korthikanti's multi-head figures."""
    b = dtype_bytes
    mk = MASK_BYTES
    f = ffn_mult * d
    out = [Layer("embedding", "embedding", fwd_flops=0.0, bwd_flops=0.0, params=V * d + s * d,
                 act_bytes=s * d * b, fwd_mem_bytes=2 * s * d * b, mp_ar_fwd=1, mp_ar_bwd=0,
                 saved_bytes=s * d * mk)]                         # embedding dropout mask
    kv = d * (kv_heads or heads) / heads                        # K and V width (GQA: < d)
    attn_params = 2 * d * d + 2 * d * kv + 2 * d + 2 * kv + 2 * d  # Q, K, V + proj (+bias) + layer norm
    mlp_params = 2 * d * f + f + d + 2 * d                       # fc1 + fc2 (+bias) + layer norm
    attn_flops = 4 * s * d * (d + kv) + 4 * s * s * d          # QKV, proj; QK^T and attn x V
    mlp_flops = 4 * s * d * f
    # forward activation traffic: block input + output (s d each), QKV/context (4 s d),
    # scores and probabilities (2 x heads x s^2, written and read), MLP hidden (f s, written+read)
    attn_mem = (2 * s * d + 4 * s * d + 4 * heads * s * s) * b
    mlp_mem = (2 * s * d + 2 * s * f) * b
    # Megatron MP splits the heads and the MLP hidden dimension: all of that traffic is split,
    # the block's input and output (2 s d) are read / written in full by every MP member
    attn_split = (4 * s * d + 4 * heads * s * s) * b / attn_mem
    mlp_split_mem = 2 * s * f * b / mlp_mem
    core_saved = (2 * b + mk) * heads * s * s                   # softmax out, dropout mask, dropout out
    attn_saved_split = 4 * b * s * d + core_saved               # Q, K, V, projection input + core
    attn_saved = (2 * b + mk) * s * d + attn_saved_split        # + layer-norm in, QKV in, dropout mask
    mlp_split = 2 * b * s * f                                    # GeLU input and output
    mlp_saved = (2 * b + mk) * s * d + mlp_split
    for i in range(L):
        out.append(Layer(f"layer{i}.attn", "attention", attn_flops, 2 * attn_flops, attn_params,
                         s * d * b, attn_mem, 1, 1, mem_split=attn_split, saved_bytes=attn_saved,
                         saved_split=attn_saved_split,
                         core_saved=core_saved, core_flops=4 * s * s * d, core_mem_bytes=4 * heads * s * s * b))
        out.append(Layer(f"layer{i}.mlp", "mlp", mlp_flops, 2 * mlp_flops, mlp_params, s * d * b, mlp_mem, 1, 1,
                         mem_split=mlp_split_mem, saved_bytes=mlp_saved, saved_split=mlp_split))
    # output logits with weights tied to the embedding (no extra parameters); final layer norm;
    # saved: the final layer-norm input, the logits' input and the logits (split over MP)
    out.append(Layer("logits", "logits", 2 * s * d * V, 4 * s * d * V, 2 * d, s * d * b,
                     (s * d + 2 * s * V) * b, 0, 1, mem_split=2 * V / (d + 2 * V),
                     saved_bytes=2 * b * s * d + b * s * V, saved_split=b * s * V))
    return out


def _conv(name, cin, cout, k, stride, h, w, b, kind="conv", bn=True, pad=None):
    pad = (k // 2) if pad is None else pad
    ho = (h + 2 * pad - k) // stride + 1
    wo = (w + 2 * pad - k) // stride + 1
    macs = cout * ho * wo * cin * k * k
    params = cout * cin * k * k + (2 * cout if bn else 0)
    in_b, out_b = cin * h * w * b, cout * ho * wo * b
    # conv reads its input, writes its output; batch norm + ReLU read and write it again
    mem = in_b + out_b + (2 * out_b if bn else 0)
    # saved for backward: the conv output (batch norm's input) and the batch-norm/ReLU output
    # (the ReLU mask and the next layer's input); this layer's own input is the previous one's
    saved = 2 * out_b if bn else out_b
    return Layer(name, kind, 2.0 * macs, 4.0 * macs, params, out_b, mem, 1, 1, saved_bytes=saved), ho, wo


def resnet_layers(spec: dict, dtype_bytes: int = 2) -> list[Layer]:
    """Bottleneck ResNet layers (He et al. 2016, Table 1) from stem + stage shapes."""
    b = dtype_bytes
    c, h, w = (int(v) for v in spec["image"])
    stem = spec["stem"]
    out = []
    l, h, w = _conv("conv1", c, stem["channels"], stem["kernel"], stem["stride"], h, w, b)
    out.append(l)
    c = stem["channels"]
    pk, ps = stem["pool_kernel"], stem["pool_stride"]
    hp, wp = (h + 2 * (pk // 2) - pk) // ps + 1, (w + 2 * (pk // 2) - pk) // ps + 1
    out.append(Layer("maxpool", "pool", c * hp * wp * pk * pk, c * hp * wp * pk * pk, 0, c * hp * wp * b,
                     (c * h * w + c * hp * wp) * b, 0, 0))
    h, w = hp, wp
    exp = int(spec.get("expansion", 4))
    for si, st in enumerate(spec["stages"]):
        width = int(st["width"])
        for bi in range(int(st["blocks"])):
            stride = int(st["stride"]) if bi == 0 else 1
            pre = f"stage{si + 1}.block{bi}"
            l1, h1, w1 = _conv(pre + ".conv1", c, width, 1, 1, h, w, b)
            l2, h2, w2 = _conv(pre + ".conv2", width, width, 3, stride, h1, w1, b)
            l3, h3, w3 = _conv(pre + ".conv3", width, width * exp, 1, 1, h2, w2, b)
            out += [l1, l2, l3]
            if bi == 0:
                ld, _, _ = _conv(pre + ".downsample", c, width * exp, 1, stride, h, w, b)
                out.append(ld)
            # residual add + ReLU: read two tensors, write one
            out.append(Layer(pre + ".add", "eltwise", width * exp * h3 * w3, width * exp * h3 * w3, 0,
                             width * exp * h3 * w3 * b, 3 * width * exp * h3 * w3 * b, 0, 0))
            c, h, w = width * exp, h3, w3
    out.append(Layer("avgpool", "pool", c * h * w, c * h * w, 0, c * b, (c * h * w + c) * b, 0, 0))
    k = int(spec["classes"])
    out.append(Layer("fc", "fc", 2.0 * c * k, 4.0 * c * k, c * k + k, k * b, (c + k) * b, 1, 1))
    return out


# ---- loading -----------------------------------------------------------------------------------

#: the paper's workloads (FRED paper Fig. 10): what `fred estimate`, `fred scan` and the
#: training table run when no workload is named; the other bundled ones (the mixture-of-experts
#: models) run when named (``-w mixtral-8x7b``)
TABLE_WORKLOADS = ("resnet-152", "transformer-17b", "gpt3-175b", "transformer-1t")


def default_workloads() -> list[str]:
    """The workloads run when none is named: :data:`TABLE_WORKLOADS`."""
    return list(TABLE_WORKLOADS)


def list_workloads() -> list[str]:
    """Names of the bundled workloads (file stems' ``name`` fields), in a fixed order."""
    order = ["resnet-152", "transformer-17b", "gpt3-175b", "transformer-1t", "llama2-70b", "mixtral-8x7b",
             "deepseek-moe-16b"]
    names = []
    for p in sorted(DATA_DIR.glob("*.yml")):
        raw = _bundled_yaml(p)
        if isinstance(raw, dict) and "kind" in raw and "name" in raw:
            names.append(str(raw["name"]))
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


_ALIASES = {"resnet152": "resnet-152", "resnet": "resnet-152", "t17b": "transformer-17b", "transformer17b": "transformer-17b",
            "17b": "transformer-17b", "gpt3": "gpt3-175b", "gpt-3": "gpt3-175b", "gpt3-175b": "gpt3-175b",
            "gpt-3-175b": "gpt3-175b", "t1t": "transformer-1t", "transformer1t": "transformer-1t", "1t": "transformer-1t",
            "mixtral": "mixtral-8x7b", "mixtral8x7b": "mixtral-8x7b", "deepseek-moe": "deepseek-moe-16b",
            "deepseekmoe": "deepseek-moe-16b", "deepseek-moe16b": "deepseek-moe-16b"}


def is_file_name(name: str) -> bool:
    """``name`` names a workload file (a path, or ``*.yml``/``*.yaml``), not a bundled workload."""
    return os.sep in name or name.endswith((".yml", ".yaml"))


def workload_ref(name) -> str:
    """How to load ``name`` again: the file name for a workload file, else the bundled workload's
    name (``gpt3`` -> ``gpt3-175b``). Loads and checks it."""
    w = load_workload(name)
    return str(name) if is_file_name(str(name)) else w.name


def _find(name: str) -> Path:
    if is_file_name(name):
        problem = input_problem(name, MAX_FILE_BYTES)
        if problem == "no such file":
            raise FredError(f"workload file {name!r} not found")
        if problem:
            raise FredError(f"workload file {name!r}: {problem}")
        return Path(name)
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    for p in sorted(DATA_DIR.glob("*.yml")):
        raw = _bundled_yaml(p)
        if isinstance(raw, dict) and str(raw.get("name", "")).lower() == key:
            return p
    raise FredError(f"unknown workload {name!r}; known workloads: {', '.join(list_workloads())}")


def load_workload(name) -> Workload:
    """Load a bundled workload by name (``resnet-152``, ``transformer-17b``, ``gpt3-175b``,
    ``transformer-1t``; aliases like ``gpt3`` work) or a YAML file path."""
    if isinstance(name, Workload):
        return name
    path = _find(str(name))
    key = _file_key(path)
    w = _PARSED.get(key) if key is not None else None
    if w is None:
        w = _parse_workload(path)
        if key is not None:
            _PARSED[key] = w
    return replace(w, shape=dict(w.shape))      # a copy: callers may touch the shape dict


# ---- the parse cache: a workload file is parsed once per process while it is unchanged -------
#: parsed workloads and bundled-file mappings by (resolved path, modification time, size)
_PARSED: dict = {}
_BUNDLED: dict = {}


def _file_key(path):
    """(resolved path, mtime in ns, size) of ``path``; None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (str(Path(path).resolve()), st.st_mtime_ns, st.st_size)


def _bundled_yaml(p):
    """The mapping of bundled workload file ``p`` (None when it does not parse), parsed once
    while the file is unchanged (only its ``name`` and ``kind`` are read from it)."""
    key = _file_key(p)
    if key is None or key not in _BUNDLED:
        try:
            raw = yaml.safe_load(p.read_text())
        except yaml.YAMLError:
            raw = None
        if key is None:
            return raw
        _BUNDLED[key] = raw
    return _BUNDLED[key]


def _parse_workload(path) -> Workload:
    where = display_name(path)
    try:
        text = decode_text(read_input(path, "workload file", MAX_FILE_BYTES), f"workload {where}")
        raw = yaml.load(text, Loader=NumberLoader)  # 17.2e9 is a number (YAML 1.2), as in network files
    except yaml.YAMLError as exc:
        raise FredError(f"workload {where}: malformed YAML ({str(exc).splitlines()[0]})") from None
    except ValueError as exc:
        raise FredError(str(exc)) from None
    except RecursionError:
        raise FredError(f"workload {where}: malformed YAML (nested too deeply)") from None
    if not isinstance(raw, dict):
        raise FredError(f"workload {where}: expected a mapping at top level")
    return workload_from_dict(raw, where)


def workload_from_dict(raw: dict, where: str = "<dict>") -> Workload:
    """A :class:`Workload` from the mapping of a workload file; every field is checked with its type
    and range (:mod:`fred.model.workload.fields`): a bad one is one FredError line naming it."""
    if not isinstance(raw, dict):
        raise FredError(f"workload {where}: expected a mapping at top level, not {type(raw).__name__}")
    name = get_field(raw, "name", where, kind=str)
    kind = get_field(raw, "kind", where, kind=str).lower()
    b = get_field(raw, "dtype_bytes", where, default=2)
    shape = {}
    if kind == "transformer":
        for k in ("layers", "hidden", "heads", "seq", "vocab"):
            shape[k] = get_field(raw, k, where)
        shape["ffn_mult"] = get_field(raw, "ffn_mult", where, default=4.0)
        shape["kv_heads"] = get_field(raw, "kv_heads", where, default=shape["heads"])
        if shape["hidden"] % shape["heads"]:
            raise FredError(f"workload {where}: hidden {shape['hidden']} is not a multiple of heads {shape['heads']}")
        if shape["heads"] % shape["kv_heads"]:
            raise FredError(f"workload {where}: field 'kv_heads' = {shape['kv_heads']} must divide heads "
                            f"({shape['heads']})")
        if any(raw.get(k) is not None for k in MODERN_FIELDS):
            # gated FFNs, untied embeddings, mixture of experts (kv_heads alone: the Megatron form)
            layers = modern_layers(check_modern_shape(raw, where, shape), b, Layer)
        else:
            layers = transformer_layers(shape["layers"], shape["hidden"], shape["heads"], shape["seq"], shape["vocab"],
                                        shape["ffn_mult"], b, shape["kv_heads"])
    elif kind == "resnet":
        check_resnet_shape(raw, where)
        for k in ("image", "stem", "stages", "classes"):
            shape[k] = raw[k]
        layers = resnet_layers(raw, b)
    elif kind == "layers":
        entries = check_layer_list(get_field(raw, "layer_list", where), where)
        layers = []
        for i, entry in enumerate(entries):
            f = layer_entry(entry, i, where)
            layers.append(Layer(f["name"], f["kind"], f["fwd_flops"], f["bwd_flops"], f["params"], f["act_bytes"],
                                f["fwd_mem_bytes"], f["mp_ar_fwd"], f["mp_ar_bwd"], saved_bytes=f["saved_bytes"],
                                saved_split=f["saved_split"]))
    else:
        raise FredError(f"workload {where}: unknown kind {kind!r}; expected transformer, resnet or layers")
    for l in layers:
        if min(l.fwd_flops, l.bwd_flops, l.params, l.act_bytes, l.fwd_mem_bytes, l.saved_split) < 0 or (
                l.saved_bytes is not None and not l.saved_split <= l.saved_bytes):
            raise FredError(f"workload {where}: layer {l.name} has a negative size (or saved_split > saved_bytes)")
    strategy = get_field(raw, "strategy", where, default="MP(1)-DP(20)-PP(1)", kind=str)
    try:
        parse_strategy(strategy)  # its form (the NPU count is the wafer's, checked when it runs)
    except ValueError as exc:
        raise FredError(f"workload {where}: field 'strategy': {exc}") from None
    microbatches = get_field(raw, "microbatches", where, default=1)
    samples = get_field(raw, "samples_per_replica", where, default=16.0)
    if microbatches > samples:
        raise FredError(f"workload {where}: field 'microbatches' = {microbatches} exceeds samples_per_replica "
                        f"{samples:g} (a microbatch holds at least one sample)")
    return Workload(
        name=name, title=str(raw.get("title", name)), source=str(raw.get("source", "")), kind=kind,
        layers=tuple(layers), dtype_bytes=b,
        input_bytes_per_sample=get_field(raw, "input_bytes_per_sample", where, default=0.0),
        mode=_check_mode(raw.get("mode", "weight-stationary"), where),
        strategy=strategy, microbatches=microbatches, samples_per_replica=samples,
        published_params=get_field(raw, "published_params", where, default=None),
        sweep_microbatches=check_sweep_microbatches(raw.get("sweep_microbatches"), where), shape=shape, path=where)


def sweep_microbatches(w: Workload, pp: int, samples_per_replica: float) -> int:
    """Microbatch count for a strategy sweep (FRED paper footnote 6 for Transformer-17B at
    DP x 40; "pp" = as many microbatches as stages, as for Transformer-1T). Without a rule:
    1 microbatch if PP = 1, else the workload's headline count, at least PP."""
    rule = w.sweep_microbatches
    if isinstance(rule, dict) and pp in rule and samples_per_replica >= 40:
        return rule[pp]
    if rule == "pp":
        return pp
    if pp == 1:
        return 1
    m = max(w.microbatches, pp)
    return int(min(m, math.floor(samples_per_replica)) or 1)
