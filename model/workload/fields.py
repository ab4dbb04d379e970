"""The fields of a workload file (:mod:`fred.model.workload.loader`), checked with their types and ranges.

Every bad field is one :class:`fred.FredError` line naming the file, the field and the value:
``workload my.yml: field 'layers' = 1e+400 must be a finite number``. The ranges are what the
model is meant for and what an estimate costs: the bundled workloads have up to 128 layers,
hidden sizes up to 25,600, sequences of 2,048 tokens and vocabularies of 51,200; every layer is
simulated per microbatch, so the layer count is bounded by run time, and the shapes so that
FLOPs and bytes stay far inside floating point.
"""

from __future__ import annotations

import math

from fred import FredError

__all__ = ["get_field", "LIMITS", "check_resnet_shape", "check_layer_list", "layer_entry", "check_sweep_microbatches",
           "MODERN_FIELDS", "MOE_FIELDS", "check_modern_shape", "get_flag"]

_MISSING = object()

#: key -> (kind, least, most) of the scalar fields
LIMITS = {
    "layers": (int, 1, 2048), "hidden": (int, 1, 2**20), "heads": (int, 1, 2**16), "seq": (int, 1, 2**20),
    "vocab": (int, 1, 2**24), "ffn_mult": (float, 1e-3, 1e3), "dtype_bytes": (int, 1, 16),
    "microbatches": (int, 1, 1024), "samples_per_replica": (float, 1, 1e6),
    "input_bytes_per_sample": (float, 0, 2**50), "published_params": (float, 0, 1e18),
    "classes": (int, 1, 2**24), "expansion": (int, 1, 64),
    # decoder transformers of the Llama / Mixtral / DeepSeek family (fred.model.workload.moe)
    "kv_heads": (int, 1, 2**16), "ffn_hidden": (int, 1, 2**22),
    # mixture of experts: routed experts, experts per token, an expert's FFN width, shared
    # (always active) experts, which layers are MoE, routing skew and expert capacity
    "experts": (int, 1, 2**16), "experts_per_token": (int, 1, 2**16), "expert_ffn_hidden": (int, 1, 2**22),
    "shared_experts": (int, 0, 2**10), "moe_layer_every": (int, 1, 2048), "first_dense_layers": (int, 0, 2048),
    "routing_zipf": (float, 0, 8), "capacity_factor": (float, 1, 2**16),
}
#: fields that select the Llama/Mixtral-style transformer derivation (fred.model.workload.moe);
#: ``kv_heads`` alone (grouped-query attention) stays with the Megatron derivation
MODERN_FIELDS = ("ffn_hidden", "gated_ffn", "tied_embeddings", "experts", "experts_per_token",
                 "expert_ffn_hidden", "shared_experts", "moe_layer_every", "first_dense_layers", "routing_zipf",
                 "capacity_factor")
#: the fields of an MoE block (need ``experts``)
MOE_FIELDS = ("experts_per_token", "expert_ffn_hidden", "shared_experts", "moe_layer_every", "first_dense_layers",
              "routing_zipf", "capacity_factor")
#: ResNet shape fields: image sides and channels, stem and stage figures
_SHAPE_MAX = 2**16
_MAX_BLOCKS = 1000
#: entries of a layer_list (every layer is simulated)
MAX_LAYER_LIST = 10_000
#: a layer of a layer_list: FLOPs, bytes and parameters per sample
_MAX_LAYER_FIGURE = 1e24


def _fail(where, key, value, problem) -> FredError:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:36] + "..."
    return FredError(f"workload {where}: field {key!r} = {shown} {problem}")


def _number(where, key, v, kind):
    if kind is int:
        if isinstance(v, float) and math.isfinite(v) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise _fail(where, key, v, "is not a whole number")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _fail(where, key, v, "is not a number")
    if not math.isfinite(v):
        raise _fail(where, key, v, "must be a finite number")
    return float(v)


def get_field(raw: dict, key: str, where: str, default=_MISSING, kind=None, low=None, high=None):
    """``raw[key]`` checked: a whole number or number of :data:`LIMITS` (or ``kind``, ``low``,
    ``high``), a non-empty string when ``kind`` is ``str``; ``default`` when absent (else an
    error: missing field)."""
    if key not in raw or raw[key] is None and default is not _MISSING:
        if default is _MISSING:
            raise FredError(f"workload {where}: missing field {key!r}")
        return default
    v = raw[key]
    if key in LIMITS and kind is None:
        kind, low, high = LIMITS[key]
    if kind is str:
        if not isinstance(v, (str, int, float)) or isinstance(v, bool) or not str(v).strip():
            raise _fail(where, key, v, "is not a name")
        return str(v).strip()
    if kind in (int, float):
        v = _number(where, key, v, kind)
        if low is not None and v < low:
            raise _fail(where, key, v, f"is too small: must be >= {low:g}")
        if high is not None and v > high:
            raise _fail(where, key, v, f"is too large: must be <= {high:g}")
    return v


def check_resnet_shape(raw: dict, where: str) -> None:
    """The ResNet fields (image, stem, stages, classes, expansion) before the layers are derived."""
    img = raw.get("image")
    if not isinstance(img, list) or len(img) != 3:
        raise _fail(where, "image", img, "must be a list [channels, height, width]")
    for i, v in enumerate(img):
        get_field({"image": v}, "image", where, kind=int, low=1, high=_SHAPE_MAX)
    stem = raw.get("stem")
    if not isinstance(stem, dict):
        raise _fail(where, "stem", stem, "must be a mapping of channels, kernel, stride, pool_kernel, pool_stride")
    for k in ("channels", "kernel", "stride", "pool_kernel", "pool_stride"):
        get_field(stem, k, f"{where} (stem)", kind=int, low=1, high=_SHAPE_MAX)
    stages = raw.get("stages")
    if not isinstance(stages, list) or not stages:
        raise _fail(where, "stages", stages, "must be a non-empty list of {blocks, width, stride}")
    blocks = 0
    for i, st in enumerate(stages):
        if not isinstance(st, dict):
            raise _fail(where, f"stages[{i}]", st, "must be a mapping of blocks, width, stride")
        blocks += get_field(st, "blocks", f"{where} (stages[{i}])", kind=int, low=1, high=_MAX_BLOCKS)
        if blocks > _MAX_BLOCKS:
            raise _fail(where, "stages", f"{blocks} blocks", f"has too many blocks: at most {_MAX_BLOCKS} in all")
        for k in ("width", "stride"):
            get_field(st, k, f"{where} (stages[{i}])", kind=int, low=1, high=_SHAPE_MAX)
    get_field(raw, "classes", where)
    get_field(raw, "expansion", where, default=4)


def check_layer_list(entries, where: str) -> list:
    if not isinstance(entries, list) or not entries:
        raise FredError(f"workload {where}: layer_list must be a non-empty list of layers")
    if len(entries) > MAX_LAYER_LIST:
        raise FredError(f"workload {where}: layer_list has {len(entries):,} layers, more than {MAX_LAYER_LIST:,}")
    return entries


def layer_entry(entry, i: int, where: str) -> dict:
    """Layer ``i`` of a ``layer_list``: its figures checked (finite, >= 0, bounded)."""
    if not isinstance(entry, dict):
        raise _fail(where, f"layer_list[{i}]", entry, "must be a mapping (fwd_flops, params, act_bytes, ...)")
    w = f"{where} (layer_list[{i}])"
    out = {"name": str(entry.get("name", f"l{i}")), "kind": str(entry.get("kind", "layer"))}
    for k in ("fwd_flops", "params", "act_bytes"):
        out[k] = get_field(entry, k, w, kind=float, low=0, high=_MAX_LAYER_FIGURE)
    for k, dflt in (("bwd_flops", 2 * out["fwd_flops"]), ("fwd_mem_bytes", 2 * out["act_bytes"]),
                    ("saved_split", 0.0), ("saved_bytes", None)):
        out[k] = get_field(entry, k, w, default=dflt, kind=float, low=0, high=_MAX_LAYER_FIGURE)
    for k in ("mp_ar_fwd", "mp_ar_bwd"):
        out[k] = get_field(entry, k, w, default=0, kind=int, low=0, high=64)
    return out


def check_sweep_microbatches(value, where: str):
    """``sweep_microbatches``: None, ``pp``, or a mapping PP -> microbatches (whole numbers >= 1)."""
    if value is None or value == "pp":
        return value
    if not isinstance(value, dict) or not value:
        raise _fail(where, "sweep_microbatches", value, "must be 'pp' or a mapping of PP size to microbatches")
    out = {}
    for k, v in value.items():
        pp = get_field({"pp": k}, "pp", f"{where} (sweep_microbatches)", kind=int, low=1, high=1024)
        out[pp] = get_field({"microbatches": v}, "microbatches", f"{where} (sweep_microbatches[{pp}])")
    return out


def get_flag(raw: dict, key: str, where: str, default: bool) -> bool:
    """``raw[key]`` as a yes/no field (YAML true/false); ``default`` when absent."""
    v = raw.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _fail(where, key, v, "must be true or false")
    return v


def check_modern_shape(raw: dict, where: str, shape: dict) -> dict:
    """The fields of a Llama/Mixtral/DeepSeek-style transformer (:mod:`fred.model.workload.moe`)
    added to ``shape`` (which holds layers, hidden, heads, seq, vocab, ffn_mult), each checked
    with its type and range and against the others (one FredError line naming the field)."""
    from .moe import DEFAULT_CAPACITY_FACTOR, DEFAULT_ROUTING_ZIPF

    d, h = shape["hidden"], shape["heads"]
    g = get_field(raw, "kv_heads", where, default=h)
    if g > h or h % g:
        raise _fail(where, "kv_heads", g, f"must divide heads ({h})")
    shape["kv_heads"] = g
    shape["ffn_hidden"] = get_field(raw, "ffn_hidden", where, default=max(1, round(shape["ffn_mult"] * d)))
    shape["gated_ffn"] = get_flag(raw, "gated_ffn", where, False)
    shape["tied_embeddings"] = get_flag(raw, "tied_embeddings", where, True)
    E = get_field(raw, "experts", where, default=None)
    if E is None:
        for k in MOE_FIELDS:
            if raw.get(k) is not None:
                raise _fail(where, k, raw[k], "needs the field 'experts' (a mixture-of-experts model)")
        shape.update(experts=None, experts_per_token=None, expert_ffn_hidden=None, shared_experts=0,
                     moe_layer_every=1, first_dense_layers=0, routing_zipf=None, capacity_factor=None)
        return shape
    shape["experts"] = E
    k = get_field(raw, "experts_per_token", where)
    if k > E:
        raise _fail(where, "experts_per_token", k, f"exceeds experts ({E})")
    shape["experts_per_token"] = k
    shape["expert_ffn_hidden"] = get_field(raw, "expert_ffn_hidden", where)
    shape["shared_experts"] = get_field(raw, "shared_experts", where, default=0)
    shape["moe_layer_every"] = get_field(raw, "moe_layer_every", where, default=1)
    first = get_field(raw, "first_dense_layers", where, default=0)
    if first >= shape["layers"]:
        raise _fail(where, "first_dense_layers", first, f"leaves no MoE layer of the {shape['layers']} layers")
    shape["first_dense_layers"] = first
    shape["routing_zipf"] = get_field(raw, "routing_zipf", where, default=DEFAULT_ROUTING_ZIPF)
    cap = raw.get("capacity_factor", DEFAULT_CAPACITY_FACTOR)
    if isinstance(cap, str) and cap.strip().lower() in ("none", "off", "no"):
        cap = None
    shape["capacity_factor"] = None if cap is None else get_field({"capacity_factor": cap}, "capacity_factor", where)
    return shape
