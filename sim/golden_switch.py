"""Golden model of the FRED switch: expected outputs per phase, and the traffic generator.

Plain Python (+ numpy through :mod:`fred.sim.golden_fabric`); no simulator import.

:class:`SwitchModel` knows the phase table (``{index: (vc, [Flow, ...])}``) and computes, from the
packets offered at each input port, what every output must deliver:

* **data** -- per ``(output port, phase)`` the list of packets, in order. Round ``k`` of phase
  ``f`` takes the ``k``-th packet of ``f`` at every input port of ``f``; each output ``q`` of a
  flow receives ``Header(vc, f, seq of the flow's lowest input port's packet, L)`` and the fabric
  output for that round (bit-exact, through :func:`fred.sim.golden_fabric.simulate_result` for
  the FRED fabric; lane-wise sums modulo ``2**width`` for the ideal fabric);
* **ctrl** -- per output port, the multiset of control (ACK/NACK) header words forwarded there
  (a control packet entering at port ``q`` for phase ``f`` goes to every input port of the flow
  of ``f`` that has ``q`` as an output);
* **err_packet / err_phase** -- how many packets the switch must drop and count.

Order is defined per ``(output, phase)``; across phases of one VC the switch may interleave
independent phases, and across VCs priority decides (checked separately by the bench).

:func:`make_traffic` draws a random program (phases of each VC in one global order, random
lengths, optional control and bad packets) that the bench and the measurements use.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from fred.contract import packet as pk
from fred.hdl.dtypes import get_dtype
from fred.hdl.flows import Flow
from fred.hdl.routing import route

__all__ = ["SwitchModel", "Expected", "Offered", "make_traffic", "bad_packet_words",
           "phases_to_json", "phases_from_json"]


@dataclass
class Offered:
    """What one input port is given: ``items`` in per-VC order; each item is
    ``(kind, words, packet_or_None)`` with kind ``"data"``, ``"ctrl"``, ``"bad_hdr"`` (dropped
    at the input, counts in err_packet) or ``"bad_phase"`` (dropped by the control unit, counts
    in err_phase)."""

    items: list = field(default_factory=list)


@dataclass
class Expected:
    data: dict          # (q, phase) -> [Packet]
    ctrl: dict          # q -> Counter of header words
    err_packet: int
    err_phase: int
    rounds: dict        # (phase, k) -> {"inputs": {p: item index}, "outputs": [q, ...]}

    def flits(self) -> dict:
        """output port -> total flits expected."""
        out = defaultdict(int)
        for (q, _), pkts in self.data.items():
            out[q] += sum(1 + len(x.data) for x in pkts)
        for q, c in self.ctrl.items():
            out[q] += sum(c.values())
        return dict(out)


def phases_to_json(phases: dict) -> list:
    return [{"index": i, "vc": vc, "flows": [[sorted(f.inputs), sorted(f.outputs)] for f in fl]}
            for i, (vc, fl) in sorted(phases.items())]


def phases_from_json(items) -> dict:
    return {int(d["index"]): (int(d["vc"]), [Flow(set(a), set(b)) for a, b in d["flows"]])
            for d in items}


class SwitchModel:
    def __init__(self, ports, middle, lanes, dtype, phases: dict, fabric="fred", max_len=8):
        self.P, self.middle, self.lanes = ports, middle, lanes
        self.dtype = get_dtype(dtype)
        self.flit_bits = lanes * self.dtype.width
        self.phases = dict(phases)
        self.fabric = fabric
        self.max_len = max_len
        self._routes = {}

    # -- fabric ---------------------------------------------------------------------------------
    def _route(self, idx):
        if idx not in self._routes:
            self._routes[idx] = route(self.P, self.middle, list(self.phases[idx][1]))
        return self._routes[idx]

    def fabric_outputs(self, idx, inputs: dict) -> dict:
        """inputs: port -> list of data flits (ints); returns output port -> list of flits."""
        W, n = self.dtype.width, self.lanes
        arrays = {p: np.array([pk.lanes_from_flit(f, W, n) for f in fl], dtype=np.uint64)
                  for p, fl in inputs.items()}
        if self.fabric == "ideal":
            out = {}
            for f in self.phases[idx][1]:
                acc = sum(arrays[p].astype(object) for p in sorted(f.inputs))
                acc = np.vectorize(lambda x: int(x) & self.dtype.mask, otypes=[object])(acc)
                for q in f.outputs:
                    out[q] = [pk.flit_from_lanes(row, W) for row in acc]
            return out
        from fred.sim.golden_fabric import simulate_result
        res = simulate_result(self._route(idx), {p: a.astype(np.uint32) for p, a in arrays.items()},
                              dtype=self.dtype.name)
        return {q: [pk.flit_from_lanes([int(x) for x in row], W) for row in a]
                for q, a in res.items()}

    # -- expected outputs -----------------------------------------------------------------------
    def expected(self, offered: dict) -> Expected:
        """offered: port -> :class:`Offered` (or list of items)."""
        per = defaultdict(list)     # (port, phase) -> [(item index, Packet)]
        ctrl = defaultdict(Counter)
        e_pkt = e_ph = 0
        for p, off in offered.items():
            items = off.items if isinstance(off, Offered) else off
            for k, (kind, words, packet) in enumerate(items):
                if kind == "data":
                    per[(p, packet.header.phase)].append((k, packet))
                elif kind == "ctrl":
                    h = packet.header
                    vc, flows = self.phases[h.phase]
                    for f in flows:
                        if p in f.outputs:
                            for t in f.inputs:
                                ctrl[t][pk.word_fields(words[0], self.flit_bits)[0]] += 1
                elif kind == "bad_hdr":
                    e_pkt += 1
                elif kind == "bad_phase":
                    e_ph += 1
                else:
                    raise ValueError(f"unknown item kind {kind!r}")
        data = defaultdict(list)
        rounds = {}
        for idx, (vc, flows) in sorted(self.phases.items()):
            ins = sorted(set().union(*(f.inputs for f in flows)))
            counts = {len(per[(p, idx)]) for p in ins}
            if len(counts) > 1:
                raise ValueError(f"phase {idx}: input ports hold different packet counts {counts}")
            n = counts.pop() if counts else 0
            for k in range(n):
                pkts = {p: per[(p, idx)][k][1] for p in ins}
                lens = {len(x.data) for x in pkts.values()}
                if len(lens) != 1:
                    raise ValueError(f"phase {idx} round {k}: lengths differ {lens}")
                L = lens.pop()
                outs = self.fabric_outputs(idx, {p: list(x.data) for p, x in pkts.items()})
                for f in flows:
                    src = pkts[min(f.inputs)].header.seq
                    for q in sorted(f.outputs):
                        data[(q, idx)].append(pk.Packet(pk.Header.data(vc, idx, src, L),
                                                        tuple(outs[q])))
                rounds[(idx, k)] = {"inputs": {p: per[(p, idx)][k][0] for p in ins},
                                    "outputs": sorted(set().union(*(f.outputs for f in flows)))}
        return Expected(dict(data), dict(ctrl), e_pkt, e_ph, rounds)


def bad_packet_words(kind: str, rng: random.Random, flit_bits: int, vc: int, phase: int,
                     length: int) -> list:
    """Link words of a packet the switch must drop. ``kind``: ``"check"`` (bad check byte),
    ``"magic"``, ``"kind"`` (DATA on CTRL / reserved kind), ``"framing"`` (last marker early),
    ``"unknown"`` (valid header, phase not in the table), ``"default"`` (the default index)."""
    mask = (1 << flit_bits) - 1
    data = [rng.randrange(1 << flit_bits) for _ in range(length)]
    if kind in ("unknown", "default"):
        h = pk.Header.data(vc, phase if kind == "unknown" else pk.DEFAULT_PHASE, 0, length)
        return pk.pack(pk.Packet(h, tuple(data)), flit_bits)
    words = pk.pack(pk.Packet(pk.Header.data(vc, phase, 0, length), tuple(data)), flit_bits)
    hdr = words[0] & mask
    if kind == "check":
        hdr ^= 1 << 41
    elif kind == "magic":
        hdr ^= 0x3
    elif kind == "kind":
        hdr = (hdr & ~(3 << 6)) | (3 << 6)
    elif kind == "framing":
        words = words[:-1]
        words[-1] |= 1 << flit_bits
        return words
    else:
        raise ValueError(f"unknown bad packet kind {kind!r}")
    return [hdr] + words[1:]


def make_traffic(P: int, phases: dict, rng: random.Random, *, rounds: int, flit_bits: int,
                 max_len: int, ctrl_rate: float = 0.0, bad_rate: float = 0.0,
                 unknown_phase: int | None = None, seq_start=None) -> dict:
    """A random program: per data VC a global order of ``rounds`` phase instances (each picks a
    random phase of that VC and a random length 1..max_len). Every input port of an instance
    gets one packet (seq = per-(port, phase) counter), so all sources agree on the order.
    Returns ``{port: Offered}``; items per port are in per-VC program order (the sender may
    interleave VCs freely). With ``ctrl_rate`` an output port of the instance also sends an
    ACK/NACK for it; with ``bad_rate`` droppable packets are mixed in."""
    by_vc = defaultdict(list)
    for idx, (vc, _) in phases.items():
        by_vc[vc].append(idx)
    seq = defaultdict(int)
    offered = {p: Offered() for p in range(P)}
    bad_kinds = ["check", "magic", "kind", "framing", "default"] + \
        (["unknown"] if unknown_phase is not None else [])
    order = []
    for vc in sorted(by_vc):
        order += [vc] * rounds
    rng.shuffle(order)
    for vc in order:
        idx = rng.choice(sorted(by_vc[vc]))
        flows = phases[idx][1]
        L = rng.randint(1, max_len)
        for f in flows:
            for p in sorted(f.inputs):
                s = seq[(p, idx)] % pk.SEQ_MOD
                seq[(p, idx)] += 1
                data = tuple(rng.randrange(1 << flit_bits) for _ in range(L))
                packet = pk.Packet(pk.Header.data(vc, idx, s, L), data)
                offered[p].items.append(("data", pk.pack(packet, flit_bits), packet))
        if ctrl_rate and rng.random() < ctrl_rate:
            f = rng.choice(flows)
            q = rng.choice(sorted(f.outputs))
            h = pk.Header.control(idx, rng.randrange(pk.SEQ_MOD), nack=rng.random() < 0.5)
            packet = pk.Packet(h, ())
            offered[q].items.append(("ctrl", pk.pack(packet, flit_bits), packet))
        if bad_rate and rng.random() < bad_rate:
            p = rng.randrange(P)
            kind = rng.choice(bad_kinds)
            ph = unknown_phase if kind == "unknown" else idx
            words = bad_packet_words(kind, rng, flit_bits, vc, ph, rng.randint(1, max_len))
            cat = "bad_phase" if kind in ("unknown", "default") else "bad_hdr"
            offered[p].items.append((cat, words, None))
    return offered
