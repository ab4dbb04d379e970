"""Derating the wafer's links for a bit-error rate, from the goodput the switch RTL measured.

The fault bench (sim/characterize/faults.py, ``fred characterize``) measures the goodput of Go-Back-N
through the switch against a fault rate per flit (``link_faults`` in the timing file: corrupted
flits, each caught by the wire check and recovered by a NACK and a go-back). A link with
bit-error rate ``ber`` corrupts a packet with probability

    ``q = 1 - (1 - ber) ** (wire_bits_per_flit * flits_per_packet)``

(every wire bit of every flit of the packet; the model's packets are the paper's: a header flit
and 8 data flits of 512 B, 4,141 wire bits each with the sideband and check). The measured curve
is put on the same axis, ``q_i = 1 - (1 - rate_i) ** packet_flits`` (the bench's packets), and
the goodput at ``q`` is interpolated: linearly from 1 at ``q = 0`` to the first point, then
linearly in ``log q`` between points. Beyond the last measured point the model refuses (a
one-line error saying which bit-error rate the curve reaches) rather than extrapolate.
"""

from __future__ import annotations

import math

__all__ = ["packet_error", "curve_from_section", "goodput_at", "max_bit_error_rate"]


def packet_error(ber: float, wire_bits: int, flits: int) -> float:
    """Probability that at least one of the ``wire_bits * flits`` bits of a packet flips."""
    if not (isinstance(ber, (int, float)) and 0 <= ber < 1):
        raise ValueError(f"bit-error rate {ber!r} must be in [0, 1)")
    return -math.expm1(wire_bits * flits * math.log1p(-ber)) if ber else 0.0


def curve_from_section(sec: dict) -> tuple:
    """The timing file's ``link_faults`` -> ((packet error probability, goodput), ...), with
    goodput capped at 1 (a faulty run a few cycles faster than the fault-free one is noise)."""
    n = int(sec["packet_flits"])
    pts = [(-math.expm1(n * math.log1p(-float(p["rate_per_flit"]))), min(1.0, float(p["goodput"])))
           for p in sec["points"] if float(p["rate_per_flit"]) > 0]
    return tuple(sorted(pts))


def goodput_at(curve: tuple, q: float) -> float:
    """Goodput at packet error probability ``q`` (module docstring); ValueError beyond the curve."""
    if not curve:
        raise ValueError("the timing file has no link_faults curve (schema 4, `fred characterize`)")
    if q <= 0:
        return 1.0
    q0, g0 = curve[0]
    if q <= q0:
        return 1.0 - (1.0 - g0) * q / q0
    for (qa, ga), (qb, gb) in zip(curve, curve[1:]):
        if q <= qb:
            t = (math.log(q) - math.log(qa)) / (math.log(qb) - math.log(qa))
            return ga + (gb - ga) * t
    raise ValueError(f"packet error probability {q:.3g} is beyond the measured goodput curve "
                     f"(up to {curve[-1][0]:.3g})")


def max_bit_error_rate(curve: tuple, wire_bits: int, flits: int) -> float:
    """The largest bit-error rate the curve covers for packets of ``flits`` flits."""
    q = curve[-1][0] if curve else 0.0
    return -math.expm1(math.log1p(-q) / (wire_bits * flits)) if q else 0.0
