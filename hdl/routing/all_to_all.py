"""Precompiled all-to-all: a traffic matrix in packets -> permutation phases with durations.

An all-to-all moves ``matrix[s][d]`` packets from input ``s`` to output ``d`` (the diagonal is 0:
a port sends nothing to itself through the switch). The switch runs one phase-table entry at a
time; a *round* of a phase takes one packet from every input of the phase (docs/switch.md), so
a phase here is a partial permutation (pairs ``s -> d``, idle ports allowed) with a number of
``rounds``: each of its pairs sends exactly that many packets in it. :func:`compile_all_to_all`
covers the matrix with such phases, back to back:

* **uniform** (every off-diagonal entry ``n``): the ``P - 1`` cyclic shifts
  (:func:`fred.hdl.netlist.flows.all_to_all`), ``n`` rounds each;
* **uneven**: a Birkhoff-von Neumann decomposition. The matrix is embedded in the ``2P x 2P``
  matrix ``[[M, diag(S - row sums)], [diag(S - column sums), M^T]]`` whose lines all sum to
  ``S``, the busiest input's or output's packets; every step takes a perfect matching of it
  whose smallest entry is as large as possible (a bottleneck matching, found by augmenting paths
  over the entries >= a threshold) and subtracts that smallest entry, the phase's rounds. The
  pairs of the matching that fall in the ``M`` block are the phase (the others are idle
  ports). The rounds of all phases sum to ``S`` exactly: run back to back at one packet per
  round, the schedule meets the busiest line's bound but for the switch's cost per phase.
  Each step empties at least one entry, so there are at most ``4 P^2`` phases.

**Padded cyclic shifts.** The ``P - 1`` cyclic shifts again, each with ``rounds`` = the largest
entry on it: a pair with fewer packets sends *filler* packets in the rounds it has no packet for
(the last ones of the phase: its receiver drops the packets of that phase whose ``seq`` is at or
beyond the pair's count, which both ends know from the schedule). Filler costs no time: a round
occupies every output of its phase for ``1 + L`` cycles whatever the inputs send, and the rounds
sum to ``sum over shifts of the largest entry``. With one popularity order for every source (MoE
token routing, :func:`zipf_matrix`) the most popular output's pair is the largest entry on every
shift, so that sum is the busiest output's packets: the bound, in ``P - 1`` phases (the schedule's
``padding`` matrix counts the filler).

**Table capacity.** A phase needs one phase-table entry for as long as packets of it may be at
the switch. When a decomposition has more phases than ``capacity`` entries, phases whose pairs
fit one partial permutation are merged first (the union, padded; rounds ``max`` of the two, or
their sum when they share a pair), then the phases with the most packets keep their entries
and the packets of the others are sent as default-index packets (index 255, routed online,
docs/switch.md "Online routing"), after every table phase of their source: the schedule's
``online`` matrix. Entries are not reloaded during a run: a source that reached a later phase
could present a packet under an index whose entry still routes an earlier phase, and the
switch would route it there (a barrier between the sources and the table writes would be
needed; the online tail needs none).

**The choice.** :func:`compile_all_to_all` builds every candidate (cyclic shifts, exact or
padded; Birkhoff-von Neumann, merged and cut to the table) and keeps the one with the fewest
estimated cycles (:func:`estimate_cycles`: ``(1 + L)`` per round, :data:`PHASE_CHANGE_CYCLES`
per phase, the online tail at :data:`ONLINE_FRACTION` of line rate on its busiest line); on a tie
the one with less filler.

Pure Python, no simulator import.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fred.hdl.netlist import Flow, all_to_all

__all__ = ["A2APhase", "Schedule", "compile_all_to_all", "online_schedule", "uniform_matrix", "zipf_matrix",
           "check_matrix", "bound_packets", "estimate_cycles", "METHODS", "PHASE_CHANGE_CYCLES",
           "ONLINE_FRACTION"]

#: the compiler's candidate decompositions (``compile_all_to_all(method=...)`` forces one)
METHODS = ("cyclic-shifts", "birkhoff-von-neumann")
#: idle cycles at an output per phase change in the estimate: measured 6 on FRED_3(4) and
#: FRED_3(12) (docs/switch.md, "All-to-all at line rate"; ``config_cycles_per_phase``)
PHASE_CHANGE_CYCLES = 6
#: the online router's rate on the busiest line of a skewed all-to-all in the estimate, as a
#: fraction of line rate: measured 0.27 on FRED_3(12) (docs/switch.md, "All-to-all at line rate")
ONLINE_FRACTION = 0.27


@dataclass(frozen=True)
class A2APhase:
    """One phase: ``pairs`` ((source, destination), ...) and the packets each pair sends in it."""

    pairs: tuple
    rounds: int

    def flows(self) -> list:
        return [Flow({s}, {d}) for s, d in self.pairs]


@dataclass
class Schedule:
    """Table phases in the order the sources send them, plus the packets left to online routing
    (``online[s][d]``)."""

    ports: int
    phases: list
    online: list = field(default_factory=list)
    method: str = ""
    #: filler packets per pair (``padding[s][d]``): sent in the table phases beyond the pair's
    #: own packets (each phase's last ones for that pair), dropped by the receiver
    padding: list = field(default_factory=list)

    def table(self, vc: int) -> dict:
        """``{index: (vc, [Flow, ...])}`` for :meth:`fred.hdl.switch.top.Switch.cfg_words`."""
        return {k: (vc, ph.flows()) for k, ph in enumerate(self.phases)}

    def per_source(self, rng: random.Random) -> dict:
        """source -> [(phase index, or None for a default-index packet, destination), ...] in
        sending order: the table phases in order (``rounds`` packets per phase it takes part
        in), then its online packets in a random order (``rng``: an online router is given no
        schedule, so the sources do not coordinate their destinations)."""
        out = {s: [] for s in range(self.ports)}
        for k, ph in enumerate(self.phases):
            for s, d in ph.pairs:
                out[s].extend([(k, d)] * ph.rounds)
        for s, row in enumerate(self.online):
            tail = [(None, d) for d in range(self.ports) for _ in range(row[d])]
            rng.shuffle(tail)
            out[s].extend(tail)
        return out

    def sent(self) -> list:
        """The packets the sources send per pair, filler included (table phases + online)."""
        P = self.ports
        m = [list(r) for r in self.online] if self.online else [[0] * P for _ in range(P)]
        for ph in self.phases:
            for s, d in ph.pairs:
                m[s][d] += ph.rounds
        return m

    def covered(self) -> list:
        """The matrix this schedule moves (table phases + online, filler excluded)."""
        m = self.sent()
        for s, row in enumerate(self.padding):
            for d, x in enumerate(row):
                m[s][d] -= x
        return m

    def filler(self) -> int:
        """Filler packets in all."""
        return sum(map(sum, self.padding)) if self.padding else 0

    def rounds(self) -> int:
        """Rounds of the table phases, back to back."""
        return sum(ph.rounds for ph in self.phases)


def check_matrix(matrix) -> list:
    """Validate a traffic matrix (square, P >= 2, non-negative integers, zero diagonal); return
    it as a list of lists of int. ValueError / TypeError naming the bad entry."""
    if not isinstance(matrix, (list, tuple)) or len(matrix) < 2:
        raise ValueError(f"all-to-all matrix must be a list of at least 2 rows, not {matrix!r}")
    P = len(matrix)
    out = []
    for s, row in enumerate(matrix):
        if not isinstance(row, (list, tuple)) or len(row) != P:
            raise ValueError(f"all-to-all matrix row {s} must have {P} entries, not {row!r}")
        r = []
        for d, x in enumerate(row):
            if isinstance(x, bool) or not isinstance(x, int) or x < 0:
                raise ValueError(f"all-to-all matrix[{s}][{d}] = {x!r} must be a packet count >= 0")
            if s == d and x:
                raise ValueError(f"all-to-all matrix[{s}][{s}] = {x} must be 0 (a port sends "
                                 f"nothing to itself through the switch)")
            r.append(int(x))
        out.append(r)
    return out


def bound_packets(matrix) -> int:
    """Packets of the busiest input or output (the schedule's length at one packet per round)."""
    P = len(matrix)
    return max(max(sum(r) for r in matrix), max(sum(matrix[s][d] for s in range(P)) for d in range(P)))


def uniform_matrix(ports: int, packets_per_pair: int) -> list:
    return [[0 if s == d else packets_per_pair for d in range(ports)] for s in range(ports)]


def zipf_matrix(ports: int, packets_per_source: int, exponent: float, rng: random.Random) -> list:
    """Every source sends ``packets_per_source`` packets, each to an output drawn from a Zipf
    distribution over the other outputs: output ``d`` has weight ``1 / (d + 1) ** exponent``
    (one popularity order for every source, as MoE token routing gives: a popular expert is
    popular with every sender)."""
    m = [[0] * ports for _ in range(ports)]
    for s in range(ports):
        dests = [d for d in range(ports) if d != s]
        for d in rng.choices(dests, [1.0 / (d + 1) ** exponent for d in dests], k=packets_per_source):
            m[s][d] += 1
    return m


def _perfect_matching(n, allowed):
    """Kuhn's augmenting paths; ``allowed[i]`` = columns row i may take. col -> row, or None."""
    owner = [-1] * n

    def augment(i, seen):
        for j in allowed[i]:
            if not seen[j]:
                seen[j] = True
                if owner[j] < 0 or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(n):
        if not augment(i, [False] * n):
            return None
    return owner


def _bottleneck_matching(A):
    """A perfect matching of the positive entries of A maximising its smallest entry."""
    n = len(A)
    vals = sorted({v for r in A for v in r if v > 0})
    lo, hi, best = 0, len(vals) - 1, None
    while lo <= hi:                      # the largest threshold with a perfect matching
        mid = (lo + hi) // 2
        t = vals[mid]
        m = _perfect_matching(n, [[j for j in range(n) if A[i][j] >= t] for i in range(n)])
        if m is not None:
            best, lo = m, mid + 1
        else:
            hi = mid - 1
    return best


def _bvn(M):
    P = len(M)
    S = bound_packets(M)
    n = 2 * P
    A = [[0] * n for _ in range(n)]
    for s in range(P):
        for d in range(P):
            A[s][d] = M[s][d]
            A[P + d][P + s] = M[s][d]
        A[s][P + s] = S - sum(M[s])
        A[P + s][s] = S - sum(M[k][s] for k in range(P))
    phases = []
    while any(any(r) for r in A):
        owner = _bottleneck_matching(A)
        assert owner is not None, "a matrix with equal line sums has a perfect matching (Birkhoff)"
        rounds = min(A[owner[j]][j] for j in range(n))
        pairs = []
        for j in range(n):
            i = owner[j]
            A[i][j] -= rounds
            if i < P and j < P:
                pairs.append((i, j))
        if pairs:
            phases.append(A2APhase(tuple(sorted(pairs)), rounds))
    return phases


def estimate_cycles(schedule, length: int = 8) -> float:
    """Cycles the switch needs for ``schedule`` with packets of ``1 + length`` flits, estimated:
    ``(1 + length)`` per round of the table phases (back to back), :data:`PHASE_CHANGE_CYCLES` per
    phase, and the online packets of the busiest line at :data:`ONLINE_FRACTION` of line rate."""
    tail = bound_packets(schedule.online) if schedule.online else 0
    return ((1 + length) * schedule.rounds() + PHASE_CHANGE_CYCLES * len(schedule.phases)
            + (1 + length) * tail / ONLINE_FRACTION)


def _shifts(M):
    """The ``P - 1`` cyclic shifts, each with rounds = its largest entry (the others padded)."""
    P = len(M)
    phases, pad = [], [[0] * P for _ in range(P)]
    for ph in all_to_all(range(P)):
        pairs = tuple((min(f.inputs), min(f.outputs)) for f in ph.flows)
        n = max(M[s][d] for s, d in pairs)
        if n == 0:
            continue
        for s, d in pairs:
            pad[s][d] += n - M[s][d]
        phases.append(A2APhase(pairs, n))
    uniform = not any(map(any, pad))
    return Schedule(P, phases, [[0] * P for _ in range(P)],
                    "cyclic-shifts" if uniform else "cyclic-shifts-padded", pad)


def _merge(phases, capacity):
    """Merge phases whose pairs fit one partial permutation (the smallest first, into the
    partner that adds the fewest rounds) until ``capacity`` phases remain or none fit.
    ``phases``: ``[(A2APhase, {pair: real packets})]``; returns the same kind of list."""
    phases = list(phases)
    while len(phases) > capacity:
        best = None
        order = sorted(range(len(phases)), key=lambda k: phases[k][0].rounds * len(phases[k][0].pairs))
        for a in order:
            A = phases[a][0]
            for b in range(len(phases)):
                if b == a:
                    continue
                B = phases[b][0]
                src = dict(B.pairs)
                dst = {d: s for s, d in B.pairs}
                ok = all(src.get(s, d) == d and dst.get(d, s) == s for s, d in A.pairs)
                if not ok:
                    continue
                shared = set(A.pairs) & set(B.pairs)
                n = A.rounds + B.rounds if shared else max(A.rounds, B.rounds)
                if best is None or n - A.rounds - B.rounds < best[0]:
                    best = (n - A.rounds - B.rounds, a, b, n)
            if best is not None:
                break
        if best is None:
            break
        _, a, b, n = best
        real = dict(phases[b][1])
        for pr, x in phases[a][1].items():
            real[pr] = real.get(pr, 0) + x
        merged = (A2APhase(tuple(sorted(real)), n), real)
        phases = [ph for k, ph in enumerate(phases) if k not in (a, b)] + [merged]
    return phases


def _bvn_schedule(M, capacity):
    """Birkhoff-von Neumann phases, merged and cut to ``capacity`` (the rest online)."""
    P = len(M)
    full = [(ph, {pr: ph.rounds for pr in ph.pairs}) for ph in _bvn(M)]
    phases = _merge(full, capacity)
    keep = set(sorted(range(len(phases)),
                      key=lambda k: -sum(phases[k][1].values()))[:capacity])
    online = [[0] * P for _ in range(P)]
    pad = [[0] * P for _ in range(P)]
    for k, (ph, real) in enumerate(phases):
        for (s, d), x in real.items():
            if k in keep:
                pad[s][d] += ph.rounds - x
            else:
                online[s][d] += x
    method = "birkhoff-von-neumann" + ("+merged" if len(phases) < len(full) else "") + \
        ("+online" if len(keep) < len(phases) else "")
    # the sources send the kept phases in the decomposition's order
    return Schedule(P, [ph for k, (ph, _) in enumerate(phases) if k in keep], online, method, pad)


def compile_all_to_all(matrix, capacity: int, *, length: int = 8, method: str | None = None) -> Schedule:
    """Phases (at most ``capacity`` table entries) and the online remainder for ``matrix``: the
    candidate with the fewest :func:`estimate_cycles` for packets of ``1 + length`` flits, or
    the one ``method`` (:data:`METHODS`) names (see the module docstring)."""
    M = check_matrix(matrix)
    P = len(M)
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"phase-table capacity {capacity!r} must be an integer >= 1")
    if method is not None and method not in METHODS:
        raise ValueError(f"all-to-all method {method!r} must be one of {', '.join(METHODS)}")
    cands = []
    if method in (None, "cyclic-shifts") and P - 1 <= capacity:
        cands.append(_shifts(M))
    if method in (None, "birkhoff-von-neumann"):
        cands.append(_bvn_schedule(M, capacity))
    if not cands:
        raise ValueError(f"the {P - 1} cyclic shifts do not fit a {capacity}-entry table")
    return min(cands, key=lambda c: (estimate_cycles(c, length), c.filler(), len(c.phases)))


def online_schedule(matrix) -> Schedule:
    """The whole matrix as default-index packets (the online router's figure beside the
    precompiled one)."""
    M = check_matrix(matrix)
    return Schedule(len(M), [], M, "online")
