"""File formats of the compiled soak harness (``sim/soak/harness.cpp``), and lane packing.

Every file is a sequence of little-endian 32-bit words.

Stimulus (Python -> harness)::

    MAGIC_IN, n_in, n_out, PW, CW, n_phases
    per phase: cfg[CW], idle, stall, drain, budget, n_in[k] (each input), n_out[j] (each
               output: beats expected), then each input's beats, PW words per beat

``idle`` and ``stall`` are probabilities scaled to 2^32 (a source idles / a sink stalls in a
cycle when a 32-bit random draw is below it); ``drain`` is the cycles run after the last
expected beat (an extra beat would arrive then), ``budget`` the cycles after which the phase
counts as a hang.

Results (harness -> Python)::

    per phase run: LEN, then LEN words: cycles, stream_violations, first_violation_cycle,
        unused_ready_cycles, accepted[k] (each input), got[j] (each output), the cycle of each
        accepted input beat (input by input), then per output: the cycle of each beat, its
        payloads (PW words per beat)
    MAGIC_OUT, status (0 ok, 1 a phase exceeded its budget), phases run, total cycles

Cycles count from the phase's start (its ``cfg`` is loaded two cycles before). A payload is
``lanes`` elements of 16 or 32 bits, lane 0 in the low bits, padded to whole 32-bit words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["StimPhase", "PhaseResult", "write_stimulus", "read_results", "pack", "unpack",
           "MAGIC_IN", "MAGIC_OUT"]

MAGIC_IN = 0x4B534652
MAGIC_OUT = 0x4F534652


def _elem_type(width: int):
    if width == 16:
        return np.uint16
    if width == 32:
        return np.uint32
    raise ValueError(f"element width {width} is not 16 or 32 bits")


def pack(beats, width: int, words: int) -> np.ndarray:
    """``(n, lanes)`` element bit patterns -> ``(n, words)`` uint32 payload words."""
    x = np.ascontiguousarray(np.asarray(beats).astype(_elem_type(width)))
    n = x.shape[0]
    raw = x.view(np.uint8).reshape(n, -1)
    if raw.shape[1] > 4 * words:
        raise ValueError(f"{raw.shape[1]} payload bytes do not fit {words} words")
    buf = np.zeros((n, 4 * words), dtype=np.uint8)
    buf[:, :raw.shape[1]] = raw
    return buf.view("<u4").reshape(n, words)


def unpack(words, width: int, lanes: int) -> np.ndarray:
    """``(n, PW)`` uint32 payload words -> ``(n, lanes)`` uint32 element bit patterns."""
    w = np.ascontiguousarray(np.asarray(words, dtype="<u4"))
    n = w.shape[0]
    nbytes = lanes * width // 8
    raw = np.ascontiguousarray(w.view(np.uint8).reshape(n, -1)[:, :nbytes])
    return raw.view(_elem_type(width)).reshape(n, lanes).astype(np.uint32)


def _prob(p: float) -> int:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"pause probability {p!r} must be in [0, 1)")
    return min(int(round(p * 2 ** 32)), 2 ** 32 - 1)


@dataclass
class StimPhase:
    """One phase: ``cfg`` (int), pause probabilities, ``inputs`` (one ``(n, lanes)`` array or
    None per input port), ``expect`` (beats expected per output), ``drain`` and ``budget``
    cycles, and anything the caller wants to keep with it in ``info``."""

    cfg: int
    idle: float
    stall: float
    inputs: list
    expect: list
    drain: int
    budget: int
    info: dict = field(default_factory=dict)


def write_stimulus(path: Path, phases, *, n_in, n_out, width, words, cfg_words) -> None:
    """Write ``phases`` (a list of :class:`StimPhase`) for a design of these sizes."""
    with open(path, "wb") as fh:
        np.array([MAGIC_IN, n_in, n_out, words, cfg_words, len(phases)], "<u4").tofile(fh)
        for ph in phases:
            if ph.cfg < 0 or ph.cfg >> (32 * cfg_words):
                raise ValueError(f"cfg {ph.cfg:#x} does not fit {cfg_words} words")
            cfg = [(ph.cfg >> (32 * i)) & 0xFFFFFFFF for i in range(cfg_words)]
            ins = [np.zeros((0, 1), np.uint32) if x is None else np.asarray(x) for x in ph.inputs]
            head = cfg + [_prob(ph.idle), _prob(ph.stall), int(ph.drain), int(ph.budget)] + \
                [len(x) for x in ins] + [int(e) for e in ph.expect]
            np.array(head, "<u4").tofile(fh)
            for x in ins:
                if len(x):
                    pack(x, width, words).tofile(fh)


@dataclass
class PhaseResult:
    """What the harness recorded in one phase (cycles from the phase's start)."""

    cycles: int
    stream_violations: int
    first_violation: int
    unused_ready: int
    in_cycles: list          # per input: np.uint32 cycles of accepted beats
    out_cycles: list         # per output: np.uint32 cycles of delivered beats
    out_words: list          # per output: (n, PW) uint32 payload words


def read_results(path: Path, *, n_in, n_out, words) -> tuple:
    """``(status, total_cycles, [PhaseResult, ...])`` of a harness result file."""
    data = np.fromfile(path, dtype="<u4")
    if len(data) < 4 or data[-4] != MAGIC_OUT:
        raise RuntimeError(f"soak result file {path} is incomplete")
    status, ran, total = (int(v) for v in data[-3:])
    out, pos = [], 0
    for _ in range(ran):
        n = int(data[pos])
        rec = data[pos + 1:pos + 1 + n]
        pos += 1 + n
        acc = rec[4:4 + n_in].astype(np.int64)
        got = rec[4 + n_in:4 + n_in + n_out].astype(np.int64)
        q = 4 + n_in + n_out
        in_cyc = []
        for a in acc:
            in_cyc.append(rec[q:q + a])
            q += a
        out_cyc, out_w = [], []
        for g in got:
            out_cyc.append(rec[q:q + g])
            q += g
            out_w.append(rec[q:q + g * words].reshape(g, words))
            q += g * words
        out.append(PhaseResult(int(rec[0]), int(rec[1]), int(rec[2]), int(rec[3]), in_cyc,
                               out_cyc, out_w))
    return status, total, out
