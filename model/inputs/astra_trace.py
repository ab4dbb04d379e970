"""ASTRA-sim 1.x text workload traces: reader and validator.

The format (ASTRA-sim ``examples/text_converter/text_workloads/README.md``; the reader of record
is ASTRA-sim 1.x ``astra-sim/workload/Workload.cc``, ``Workload::initialize_workload``):

* line 1 -- the parallelism kind, optionally followed by header values:
  ``HYBRID_TRANSFORMER model_parallel_NPU_group: 4``;
  ``HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 4 checkpoints: 2 0 5
  checkpoint_initiates: 2 4 9`` (a count, then that many layer indices);
  ``HYBRID_DLRM 7`` (the index of the last bottom-MLP layer);
* line 2 -- the number of layers;
* one line per layer, 12 whitespace-separated fields (tabs or spaces)::

      name reserved  fwd_cycles fwd_comm fwd_bytes  ig_cycles ig_comm ig_bytes
                     wg_cycles wg_comm wg_bytes  update_cycles

  compute times in cycles, communication sizes in bytes (per NPU, as ASTRA-sim's collectives
  take them), comm types ``NONE ALLREDUCE ALLGATHER REDUCESCATTER ALLTOALL``; the last field is
  the delay after each of the layer's collectives finishes (ASTRA-sim ``Layer.cc`` applies it to
  the forward, input-gradient and weight-gradient collective alike).

Some published files hold only the layer lines (LIBRA's ``inputs/workload/*.txt``: the tool that
runs them prepends the two header lines). :func:`load_trace` takes such a header from the caller
(``header="HYBRID_TRANSFORMER model_parallel_NPU_group: 4"``, optionally with the layer count as
a second line); a file without a header and no header given is an error, and so is a header
given for a file that has one.

Stricter than ASTRA-sim (which reads with ``operator>>`` and silently treats an unknown comm type
as NONE): any malformed input is a one-line :class:`fred.FredError` naming the file, the line and
the field -- wrong field count, a non-integer or negative cycle count or size, an unknown comm
type or parallelism kind, a layer count that does not match the layer lines, an empty file.
Comm types and the kind are matched case-insensitively; blank lines are skipped.

This module only reads; :mod:`fred.model.training.trace_estimate` runs a trace on the wafer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from fred import FredError
from fred.contract.inputs import decode_text, input_problem, read_input

#: comm types of the format (ASTRA-sim 1.x ``ComType``; LIBRA's ``get_comms_type``)
COMM_TYPES = ("NONE", "ALLREDUCE", "ALLGATHER", "REDUCESCATTER", "ALLTOALL")

#: parallelism kinds this project runs (ASTRA-sim 1.x ``Workload::decode_parallelsim``)
KINDS = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_TRANSFORMER",
         "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED")

#: kinds ASTRA-sim knows that are not a training iteration of the format above
UNSUPPORTED_KINDS = {
    "HYBRID_CUSTOMIZED": "it carries a per-layer parallelism field (13 fields per line)",
    "MICRO": "it is a collective micro-benchmark, not a training iteration",
    "DISTRIBUTED_INFERENCE": "it is inference, not a training iteration",
}

#: the 12 fields of a layer line, in order
FIELDS = ("name", "reserved", "forward compute cycles", "forward comm type", "forward comm bytes",
          "input-gradient compute cycles", "input-gradient comm type", "input-gradient comm bytes",
          "weight-gradient compute cycles", "weight-gradient comm type", "weight-gradient comm bytes",
          "update delay cycles")

#: header keys with a meaning here; other ``key:`` values are kept (and reported as ignored)
MP_GROUP_KEY = "model_parallel_NPU_group"
CHECKPOINTS_KEY = "checkpoints"
INITIATES_KEY = "checkpoint_initiates"

#: ASTRA-sim stores cycles and sizes in (u)int64
MAX_INT = 2**63 - 1
#: the largest compute time and collective size taken: 2^50 cycles (13 days at 1 GHz: a layer
#: of one training iteration takes milliseconds) and 2^50 bytes (1 PiB per NPU, the largest
#: size of `fred collective --size`); beyond them the figures mean nothing for one wafer
MAX_CYCLES = 2**50
MAX_BYTES = 2**50

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


@dataclass(frozen=True)
class TraceLayer:
    name: str
    line: int                 # line number in the file (1-based)
    fwd_cycles: int
    fwd_comm: str             # one of COMM_TYPES
    fwd_bytes: int
    ig_cycles: int
    ig_comm: str
    ig_bytes: int
    wg_cycles: int
    wg_comm: str
    wg_bytes: int
    update_cycles: int

    def comm(self, phase: str) -> tuple[str, int]:
        """(comm type, bytes) of phase "fwd", "ig" or "wg"."""
        return getattr(self, f"{phase}_comm"), getattr(self, f"{phase}_bytes")

    def cycles(self, phase: str) -> int:
        return getattr(self, f"{phase}_cycles")


@dataclass(frozen=True)
class TraceHeader:
    kind: str
    mp_group: int | None = None           # model_parallel_NPU_group
    checkpoints: tuple = ()               # FWD_IN_BCKWD: checkpointed layer indices
    initiates: tuple = ()                 # FWD_IN_BCKWD: layers that start a recomputation
    last_bottom_layer: int | None = None  # HYBRID_DLRM(_ENHANCED)
    extra: dict = field(default_factory=dict)   # other key -> tuple of raw values
    text: str = ""                        # line 1 as read (whitespace normalised)
    given: bool = False                   # True: given by the caller, not read from the file


@dataclass(frozen=True)
class Trace:
    path: str
    header: TraceHeader
    layers: tuple

    @property
    def name(self) -> str:
        return Path(self.path).stem or self.path

    @property
    def kind(self) -> str:
        return self.header.kind

    def total_cycles(self) -> int:
        """Forward + input-gradient + weight-gradient cycles of all layers (no recomputation)."""
        return sum(l.fwd_cycles + l.ig_cycles + l.wg_cycles for l in self.layers)


def _show(tok: str) -> str:
    t = repr(tok)
    return t if len(t) <= 42 else t[:39] + "...'"


class _Where:
    """Builds the one-line error prefix: ``FILE: line N, field F: ...``."""

    def __init__(self, name: str):
        self.name = " ".join(str(name).split()) or "<trace>"

    def err(self, line, fld, problem) -> FredError:
        where = f"line {line}" if isinstance(line, int) else str(line)
        if fld:
            where += f", field {fld}"
        return FredError(f"{self.name}: {where}: {problem}")


def _int(tok, w, line, fld, *, minimum=0, what="a non-negative integer", maximum=None, unit=""):
    if not _INT.fullmatch(tok) or len(tok) > 40:
        raise w.err(line, fld, f"{_show(tok)} is not {what}")
    v = int(tok)
    if abs(v) > MAX_INT:
        raise w.err(line, fld, f"{_show(tok)} is out of range (at most 2^63-1 in magnitude)")
    if v < minimum:
        raise w.err(line, fld, f"{_show(tok)} is not {what}")
    if maximum is not None and v > maximum:
        raise w.err(line, fld, f"{_show(tok)} is too large: at most {maximum:,} {unit}".rstrip())
    return v


def _comm(tok, w, line, fld):
    t = tok.upper()
    if t not in COMM_TYPES:
        raise w.err(line, fld, f"unknown comm type {_show(tok)}; expected one of {', '.join(COMM_TYPES)}")
    return t


def _kind(tok, w, line):
    k = tok.upper()
    if k in UNSUPPORTED_KINDS:
        raise w.err(line, "kind", f"parallelism {k} is not supported: {UNSUPPORTED_KINDS[k]}")
    if k not in KINDS:
        raise w.err(line, "kind", f"unknown parallelism kind {_show(tok)}; expected one of {', '.join(KINDS)}")
    return k


def parse_header(text: str, *, name="<header>", line=1, given=False) -> TraceHeader:
    """Parse header line 1 (kind and values); see the module docs."""
    w = _Where(name)
    toks = str(text).split()
    if not toks:
        raise w.err(line, "kind", "empty header; expected a parallelism kind, e.g. 'DATA'")
    kind = _kind(toks[0], w, line)
    positional, keyed, order = [], {}, []
    key = None
    for tok in toks[1:]:
        if ":" in tok:
            k, _, rest = tok.partition(":")
            if not k:
                raise w.err(line, "header", f"{_show(tok)}: a header key is missing before ':'")
            canon = {MP_GROUP_KEY.lower(): MP_GROUP_KEY, CHECKPOINTS_KEY: CHECKPOINTS_KEY,
                     INITIATES_KEY: INITIATES_KEY}.get(k.lower(), k)
            if canon in keyed:
                raise w.err(line, canon, "given twice")
            key = canon
            keyed[key] = []
            order.append(key)
            if rest:
                keyed[key].append(rest)
        elif key is None:
            positional.append(tok)
        else:
            keyed[key].append(tok)

    def ints(k, minimum=0, what="a non-negative integer"):
        return [_int(v, w, line, k, minimum=minimum, what=what) for v in keyed[k]]

    mp = None
    if MP_GROUP_KEY in keyed:
        if len(keyed[MP_GROUP_KEY]) != 1:
            raise w.err(line, MP_GROUP_KEY, f"expected one positive integer, got {len(keyed[MP_GROUP_KEY])} values")
        mp = ints(MP_GROUP_KEY, minimum=1, what="a positive integer")[0]

    def index_list(k):
        if k not in keyed:
            return ()
        vals = ints(k)
        if not vals:
            raise w.err(line, k, "missing the count of layer indices")
        count, idx = vals[0], vals[1:]
        if count != len(idx):
            raise w.err(line, k, f"says {count} layer indices but lists {len(idx)}")
        return tuple(idx)

    checkpoints, initiates = index_list(CHECKPOINTS_KEY), index_list(INITIATES_KEY)
    if (checkpoints or initiates) and kind != "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
        raise w.err(line, CHECKPOINTS_KEY if checkpoints else INITIATES_KEY,
                    f"recomputation checkpoints need HYBRID_TRANSFORMER_FWD_IN_BCKWD, not {kind}")
    last_bottom = None
    if kind in ("HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"):
        if len(positional) != 1:
            raise w.err(line, "last bottom layer",
                        f"{kind} needs the index of the last bottom-MLP layer after the kind, e.g. '{kind} 7'")
        last_bottom = _int(positional[0], w, line, "last bottom layer")
    elif positional:
        raise w.err(line, "header", f"unexpected value {_show(positional[0])} after {kind} (header values are 'key: value')")
    extra = {k: tuple(keyed[k]) for k in order if k not in (MP_GROUP_KEY, CHECKPOINTS_KEY, INITIATES_KEY)}
    for k, v in extra.items():
        if not v:
            raise w.err(line, k, "missing value after ':'")
    return TraceHeader(kind=kind, mp_group=mp, checkpoints=checkpoints, initiates=initiates,
                       last_bottom_layer=last_bottom, extra=extra, text=" ".join(toks), given=given)


def _layer(toks, w, line) -> TraceLayer:
    n = len(FIELDS)
    if len(toks) < n:
        raise w.err(line, f"{len(toks) + 1} ({FIELDS[len(toks)]})",
                    f"missing: a layer line has {n} fields, this one {len(toks)}")
    if len(toks) > n:
        raise w.err(line, n + 1, f"unexpected extra value {_show(toks[n])}: a layer line has {n} fields")
    v = [toks[0], _int(toks[1], w, line, f"2 ({FIELDS[1]})", minimum=-MAX_INT, what="an integer")]
    for i in range(2, n):
        f = f"{i + 1} ({FIELDS[i]})"
        if i in (3, 6, 9):
            v.append(_comm(toks[i], w, line, f))
        elif i in (4, 7, 10):
            v.append(_int(toks[i], w, line, f, maximum=MAX_BYTES, unit="bytes (1 PiB, as fred collective --size)"))
        else:
            v.append(_int(toks[i], w, line, f, maximum=MAX_CYCLES, unit="cycles (2^50: 13 days at 1 GHz)"))
    return TraceLayer(v[0], line, *v[2:])


def parse_trace(text: str, *, name="<trace>", header=None) -> Trace:
    """Parse trace ``text``; ``name`` names it in errors; ``header``: see :func:`load_trace`.

    Returns a :class:`Trace`; every malformed input raises :class:`fred.FredError`."""
    w = _Where(name)
    if not isinstance(text, str):
        raise w.err("line 1", "", f"expected text, got {type(text).__name__}")
    lines = [(i + 1, ln.split()) for i, ln in enumerate(text.splitlines())]
    lines = [(i, t) for i, t in lines if t]
    if not lines:
        raise w.err(1, "", "empty file: no header and no layers")
    first_i, first = lines[0]
    has_header = first[0].upper() in KINDS or first[0].upper() in UNSUPPORTED_KINDS
    given_count = None
    if header is not None:
        if isinstance(header, TraceHeader):
            hdr = header
        else:
            hl = [ln for ln in str(header).splitlines() if ln.strip()]
            if not hl or len(hl) > 2:
                raise w.err("header given by the caller", "",
                            "expected the kind line, optionally followed by the layer count, e.g. "
                            "'HYBRID_TRANSFORMER model_parallel_NPU_group: 4'")
            hdr = parse_header(hl[0], name=f"{w.name}: header given by the caller", line="line 1", given=True)
            if len(hl) == 2:
                given_count = _int(hl[1].strip(), _Where(f"{w.name}: header given by the caller"), 2, "layer count")
        if has_header:
            raise w.err(first_i, "kind", f"the file has its own header ({' '.join(first)[:60]}); "
                        "a header given by the caller (--trace-header) is only for files without one")
        body = lines
        count, count_line = given_count, "header given by the caller"
    else:
        if not has_header:
            raise w.err(first_i, "kind",
                        f"no header: {_show(first[0])} is not a parallelism kind ({', '.join(KINDS)}); "
                        "a file of layer lines only needs a header given by the caller, e.g. "
                        "--trace-header 'HYBRID_TRANSFORMER model_parallel_NPU_group: 4'")
        hdr = parse_header(" ".join(first), name=w.name, line=first_i)
        if len(lines) < 2:
            raise w.err(first_i + 1, "layer count", "missing: the file ends after the header")
        count_line, ct = lines[1]
        if len(ct) != 1:
            raise w.err(count_line, "layer count",
                        f"expected one integer (the number of layers), found {len(ct)} values")
        count = _int(ct[0], w, count_line, "layer count")
        body = lines[2:]
    layers = tuple(_layer(t, w, i) for i, t in body)
    if count is not None and count != len(layers):
        raise w.err(count_line, "layer count", f"says {count} layers but the file has {len(layers)} layer lines")
    if not layers:
        raise w.err(count_line, "layer count", "the trace has no layers")
    n = len(layers)
    hw = _Where(f"{w.name}: header given by the caller" if hdr.given else w.name)
    hline = "line 1" if hdr.given else first_i
    for key, idx in ((CHECKPOINTS_KEY, hdr.checkpoints), (INITIATES_KEY, hdr.initiates)):
        bad = [x for x in idx if x >= n]
        if bad:
            raise hw.err(hline, key, f"layer index {bad[0]} out of range (the trace has {n} layers, 0..{n - 1})")
    for x in hdr.initiates:
        if not any(c <= x for c in hdr.checkpoints):
            raise hw.err(hline, INITIATES_KEY, f"layer {x} starts a recomputation but no checkpoint is at or below it")
    if hdr.last_bottom_layer is not None and hdr.last_bottom_layer >= n:
        raise hw.err(hline, "last bottom layer",
                     f"layer index {hdr.last_bottom_layer} out of range (the trace has {n} layers, 0..{n - 1})")
    return Trace(path=str(name), header=hdr, layers=layers)


def load_trace(path, header=None) -> Trace:
    """Read and validate the ASTRA-sim text trace at ``path``.

    ``header``: for files without the two header lines, the kind line (``"DATA"``,
    ``"HYBRID_TRANSFORMER model_parallel_NPU_group: 4"``, ...), optionally followed by a second
    line with the layer count; or a :class:`TraceHeader`. See :func:`trace_header`."""
    problem = input_problem(path)
    if problem == "no such file":
        raise FredError(f"trace file {str(path)!r} does not exist")
    if problem == "is a folder, not a file":
        raise FredError(f"trace file {str(path)!r} is a directory")
    try:
        text = decode_text(read_input(path, "trace file"), str(path))
    except ValueError as exc:
        raise FredError(str(exc)) from None
    return parse_trace(text, name=str(path), header=header)


def trace_header(kind: str, mp_group: int | None = None) -> str:
    """Header text from a kind and an optional model-parallel group size (validated)."""
    text = str(kind).strip() + (f" {MP_GROUP_KEY}: {int(mp_group)}" if mp_group is not None else "")
    parse_header(text, name="header", line=1, given=True)
    return text


__all__ = ["COMM_TYPES", "KINDS", "FIELDS", "Trace", "TraceHeader", "TraceLayer", "load_trace", "parse_trace",
           "parse_header", "trace_header"]
