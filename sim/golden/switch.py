"""Golden model of the FRED switch: expected outputs per phase, and the traffic generator.

Plain Python (+ numpy through :mod:`fred.sim.golden.fabric`); no simulator import.

:class:`SwitchModel` knows the phase table (``{index: (vc, [Flow, ...])}``) and computes, from the
packets offered at each input port, what every output must deliver:

* **data** -- per ``(output port, phase)`` the list of packets, in order. Round ``k`` of phase
  ``f`` takes the ``k``-th packet of ``f`` at every input port of ``f``; each output ``q`` of a
  flow receives ``Header(vc, f, seq of the flow's lowest input port's packet, L)`` and the fabric
  output for that round (bit-exact, through :func:`fred.sim.golden.fabric.simulate_result` for
  the FRED fabric; lane-wise sums modulo ``2**width`` for the ideal fabric);
* **online** -- a packet of the default index 255 (port byte = destination output) arrives at
  that output unchanged, with the port byte naming its source; order is defined per (output,
  source, VC) (:func:`stream_key`);
* **ctrl** -- per output port, the multiset of control (ACK/NACK) header words forwarded there
  (a control packet entering at port ``q`` for phase ``f``, ``q`` an output of ``f``, goes to
  every input port of ``f``: of all its flows, since a round lock-steps them; for the default
  index, to the port its port byte names);
* **err_packet / err_phase** -- how many packets the switch must drop and count.

Order is defined per ``(output, phase)``; across phases of one VC the switch may interleave
independent phases, and across VCs priority decides (checked separately by the bench).

:func:`make_traffic` draws a random program (phases of each VC in one global order, random
lengths, optional control, bad and online packets) that the bench and the measurements use;
:func:`make_online_traffic` draws default-index traffic alone (random permutations or
all-to-all).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from fred.contract import packet as pk
from fred.hdl.dtypes import get_dtype
from fred.hdl.netlist import Flow
from fred.hdl.routing import route

__all__ = ["SwitchModel", "Expected", "Offered", "make_traffic", "make_online_traffic",
           "bad_packet_words", "phases_to_json", "phases_from_json", "stream_key", "online"]


@dataclass
class Offered:
    """What one input port is given: ``items`` in per-VC order; each item is
    ``(kind, words, packet_or_None)`` with kind ``"data"``, ``"ctrl"``, ``"bad_hdr"`` (dropped
    at the input, counts in err_packet) or ``"bad_phase"`` (dropped by the control unit, counts
    in err_phase)."""

    items: list = field(default_factory=list)


def stream_key(q: int, h) -> tuple:
    """The ordered stream a delivered data packet (header ``h``) belongs to: ``(output, phase)``
    for the table's phases, ``(output, (255, source port, vc))`` for online-routed packets."""
    if h.phase == pk.DEFAULT_PHASE:
        return (q, (pk.DEFAULT_PHASE, h.port, h.vc))
    return (q, h.phase)


def online(P: int, flit_bits: int, middle: int = 3, fabric: str = "fred") -> bool:
    """Whether ``Switch(...)`` with these parameters routes the default index online (its
    ``online=None`` rule)."""
    return flit_bits >= pk.ONLINE_HEADER_BITS and (fabric == "ideal" or middle >= 3)


@dataclass
class Expected:
    data: dict          # stream_key -> [Packet]
    ctrl: dict          # q -> Counter of header words
    err_packet: int
    err_phase: int
    rounds: dict        # (phase or online stream, k) -> {"inputs": {p: item index}, "outputs": [q, ...]}

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
        from .fabric import simulate_result
        res = simulate_result(self._route(idx), {p: a.astype(np.uint32) for p, a in arrays.items()},
                              dtype=self.dtype.name)
        return {q: [pk.flit_from_lanes([int(x) for x in row], W) for row in a]
                for q, a in res.items()}

    # -- expected outputs -----------------------------------------------------------------------
    def expected(self, offered: dict) -> Expected:  # long: one pass over every kind of item
        """offered: port -> :class:`Offered` (or list of items)."""
        per = defaultdict(list)     # (port, phase) -> [(item index, Packet)]
        ctrl = defaultdict(Counter)
        data = defaultdict(list)
        rounds = {}
        e_pkt = e_ph = 0
        for p, off in offered.items():
            items = off.items if isinstance(off, Offered) else off
            for k, (kind, words, packet) in enumerate(items):
                if kind == "data" and packet.header.phase == pk.DEFAULT_PHASE:
                    h = packet.header
                    key = stream_key(h.port, replace(h, port=p))
                    rounds[(key[1], len(data[key]))] = {"inputs": {p: k}, "outputs": [h.port]}
                    data[key].append(pk.Packet(replace(h, port=p), packet.data))
                elif kind == "data":
                    per[(p, packet.header.phase)].append((k, packet))
                elif kind == "ctrl" and packet.header.phase == pk.DEFAULT_PHASE:
                    ctrl[packet.header.port][pk.word_fields(words[0], self.flit_bits)[0]] += 1
                elif kind == "ctrl":
                    h = packet.header
                    vc, flows = self.phases[h.phase]
                    if any(p in f.outputs for f in flows):      # to every input of the phase
                        for t in set().union(*(f.inputs for f in flows)):
                            ctrl[t][pk.word_fields(words[0], self.flit_bits)[0]] += 1
                elif kind == "bad_hdr":
                    e_pkt += 1
                elif kind == "bad_phase":
                    e_ph += 1
                else:
                    raise ValueError(f"unknown item kind {kind!r}")
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
    ``"magic"``, ``"kind"`` (DATA on CTRL / reserved kind), ``"framing"`` (last marker early;
    with a cut-through switch give it a ``phase`` that cannot start, or it may be taken before
    its framing breaks), ``"unknown"`` (valid header, phase not in the table), ``"default"``
    (the default index naming output port 255, which no switch here has)."""
    mask = (1 << flit_bits) - 1
    data = [rng.randrange(1 << flit_bits) for _ in range(length)]
    if kind in ("unknown", "default"):
        port = 255 if kind == "default" and flit_bits >= pk.ONLINE_HEADER_BITS else 0
        h = pk.Header.data(vc, phase if kind == "unknown" else pk.DEFAULT_PHASE, 0, length,
                           port=port)
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
                 unknown_phase: int | None = None, seq_start=None,
                 online_rate: float = 0.0) -> dict:
    """A random program: per data VC a global order of ``rounds`` phase instances (each picks a
    random phase of that VC and a random length 1..max_len). Every input port of an instance
    gets one packet (seq = per-(port, phase) counter), so all sources agree on the order.
    Returns ``{port: Offered}``; items per port are in per-VC program order (the sender may
    interleave VCs freely). With ``ctrl_rate`` an output port of the instance also sends an
    ACK/NACK for it; with ``bad_rate`` droppable packets are mixed in; with ``online_rate`` a
    random partial permutation of default-index packets (on the instance's VC) and, at the
    same rate, an ACK/NACK of the default index."""
    by_vc = defaultdict(list)
    for idx, (vc, _) in phases.items():
        by_vc[vc].append(idx)
    seq = defaultdict(int)
    spare = min(set(range(pk.MAX_PHASE + 1)) - set(phases) - {unknown_phase})
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
            ph = unknown_phase if kind == "unknown" else spare if kind == "framing" else idx
            words = bad_packet_words(kind, rng, flit_bits, vc, ph, rng.randint(1, max_len))
            cat = "bad_phase" if kind in ("unknown", "default") else "bad_hdr"
            offered[p].items.append((cat, words, None))
        if online_rate and rng.random() < online_rate:
            _online_round(offered, rng, P, vc, seq, flit_bits, max_len, rng.randint(1, P))
        if online_rate and rng.random() < online_rate:
            h = pk.Header.control(pk.DEFAULT_PHASE, rng.randrange(pk.SEQ_MOD),
                                  nack=rng.random() < 0.5, port=rng.randrange(P))
            offered[rng.randrange(P)].items.append(("ctrl", pk.pack(pk.Packet(h, ()), flit_bits),
                                                    pk.Packet(h, ())))
    return offered


def _online_round(offered, rng, P, vc, seq, flit_bits, max_len, n, dests=None, length=None):
    """Default-index packets: ``n`` random inputs to distinct random outputs (or ``dests``:
    input -> list of outputs), each of a random length 1..max_len (or ``length``)."""
    if dests is None:
        perm = list(range(P))
        rng.shuffle(perm)
        dests = {p: [perm[p]] for p in rng.sample(range(P), n)}
    for p, qs in dests.items():
        for q in qs:
            L = rng.randint(1, max_len) if length is None else length
            s = seq[(p, pk.DEFAULT_PHASE, q)] % pk.SEQ_MOD
            seq[(p, pk.DEFAULT_PHASE, q)] += 1
            data = tuple(rng.randrange(1 << flit_bits) for _ in range(L))
            packet = pk.Packet(pk.Header.data(vc, pk.DEFAULT_PHASE, s, L, port=q), data)
            offered[p].items.append(("data", pk.pack(packet, flit_bits), packet))


def make_online_traffic(P: int, rng: random.Random, *, pattern: str, rounds: int, flit_bits: int,
                        max_len: int, vc: int = pk.VC_DP, length: int | None = None) -> dict:
    """Default-index traffic alone: ``pattern`` ``"perm"`` (``rounds`` random permutations, one
    packet per input each) or ``"a2a"`` (``rounds`` times, every input sends one packet to every
    output, in a random order per input). ``length``: every packet's data flits (default:
    random 1..max_len). Returns ``{port: Offered}``."""
    if pattern not in ("perm", "a2a"):
        raise ValueError(f"online traffic pattern {pattern!r} must be perm or a2a")
    seq = defaultdict(int)
    offered = {p: Offered() for p in range(P)}
    for _ in range(rounds):
        if pattern == "perm":
            perm = list(range(P))
            rng.shuffle(perm)
            dests = {p: [perm[p]] for p in range(P)}
        else:
            dests = {p: rng.sample(range(P), P) for p in range(P)}
        _online_round(offered, rng, P, vc, seq, flit_bits, max_len, P, dests, length)
    return offered

