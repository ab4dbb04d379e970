"""Routability study: do 3D-parallel communication phases route on FRED_m(P)?

For every strategy MP(a)-DP(b)-PP(c) with a*b*c = P, worker (mp, dp, pp) with mp < a, dp < b,
pp < c is placed on a fabric port, and three phases are routed (each with every group of its
dimension at once):

* **MP**: every MP group's All-Reduce (one flow group -> group per (dp, pp)), if a > 1;
* **DP**: every DP group's All-Reduce (one flow per (mp, pp)), if b > 1;
* **PP**: every point-to-point transfer stage s -> s+1 (unicast (mp, dp, s) -> (mp, dp, s+1) for
  all mp, dp and s < c-1), if c > 1. The backward transfers (s+1 -> s) are the same flows with
  inputs and outputs swapped; the fabric is mirror-symmetric, so they route iff these do.

Placements: the paper's (``port = mp + a*(pp + c*dp)``: one MP group on consecutive ports, then
PP, then DP) and ``samples`` random permutations of it (seeded). The paper states without proof
that m = 3 plus its placement makes every such phase routable; the table checks it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fred.hdl.netlist import Flow
from .compiler import routable

__all__ = ["strategies", "paper_placement", "phases", "study", "format_study", "StudyRow",
           "DEFAULT_PORTS", "DEFAULT_SAMPLES"]

DEFAULT_PORTS = (8, 12, 16, 20)
DEFAULT_SAMPLES = 20


def strategies(P: int) -> list:
    """All (a, b, c) with a*b*c == P, in lexicographic order."""
    out = []
    for a in range(1, P + 1):
        if P % a:
            continue
        for b in range(1, P // a + 1):
            if (P // a) % b == 0:
                out.append((a, b, P // a // b))
    return out


def paper_placement(a, b, c) -> dict:
    """worker (mp, dp, pp) -> port, the paper's rule: port = mp + a*(pp + c*dp)."""
    return {(mp, dp, pp): mp + a * (pp + c * dp) for mp in range(a) for dp in range(b) for pp in range(c)}


def phases(a, b, c, place) -> dict:
    """name -> list of Flow for the MP, DP and PP phases under ``place`` (worker -> port)."""
    out = {}
    if a > 1:
        out["MP"] = [Flow(g, g) for g in
                     ([place[(mp, dp, pp)] for mp in range(a)] for dp in range(b) for pp in range(c))]
    if b > 1:
        out["DP"] = [Flow(g, g) for g in
                     ([place[(mp, dp, pp)] for dp in range(b)] for mp in range(a) for pp in range(c))]
    if c > 1:
        out["PP"] = [Flow({place[(mp, dp, s)]}, {place[(mp, dp, s + 1)]})
                     for mp in range(a) for dp in range(b) for s in range(c - 1)]
    return out


@dataclass
class Counterexample:
    P: int
    middle: int
    strategy: tuple
    placement: str          # "paper" or "random #k"
    ports: list             # port of worker (mp, dp, pp), listed in the paper's worker order
    phase: str
    flows: list             # the failing flows (strings)
    message: str


@dataclass
class StudyRow:
    P: int
    strategy: tuple
    middle: int
    paper: dict = field(default_factory=dict)      # phase -> bool
    random_ok: dict = field(default_factory=dict)  # phase -> count of routable random placements
    random_all: int = 0                            # random placements where every phase routes
    samples: int = 0
    counterexamples: list = field(default_factory=list)

    @property
    def name(self):
        a, b, c = self.strategy
        return f"MP({a})-DP({b})-PP({c})"


def study(ports=DEFAULT_PORTS, middles=(2, 3), samples=DEFAULT_SAMPLES, seed=1) -> list:
    """Run the study; list of :class:`StudyRow` (one per P, strategy, middle count)."""
    rows = []
    for P in ports:
        for strat in strategies(P):
            a, b, c = strat
            base = paper_placement(a, b, c)
            workers = sorted(base, key=lambda w: base[w])
            rng = random.Random(f"{seed}-{P}-{a}-{b}-{c}")
            perms = []
            for _ in range(samples):
                p = list(range(P))
                rng.shuffle(p)
                perms.append({w: p[base[w]] for w in base})
            for middle in middles:
                row = StudyRow(P, strat, middle, samples=samples)
                first_cx = {}
                for label, place in [("paper", base)] + [(f"random #{k}", pl) for k, pl in enumerate(perms)]:
                    allok = True
                    for ph, flows in phases(a, b, c, place).items():
                        err = routable(P, middle, flows)
                        ok = err is None
                        if label == "paper":
                            row.paper[ph] = ok
                        else:
                            row.random_ok[ph] = row.random_ok.get(ph, 0) + ok
                        if not ok:
                            allok = False
                            key = (label == "paper", ph)
                            if key not in first_cx:
                                first_cx[key] = Counterexample(
                                    P, middle, strat, label, [place[w] for w in workers], ph,
                                    [str(flows[i]) for i in err.flows], str(err))
                    if label != "paper":
                        row.random_all += allok
                for ph in phases(a, b, c, base):
                    row.random_ok.setdefault(ph, 0)
                row.counterexamples = [first_cx[k] for k in sorted(first_cx, reverse=True)]
                rows.append(row)
    return rows


def _cell(row, ph):
    if ph not in row.paper:
        return "-"
    return "ok" if row.paper[ph] else "FAIL"


def format_study(rows, counterexamples=True) -> str:
    middles = sorted({r.middle for r in rows})
    samples = max((r.samples for r in rows), default=0)
    by = {}
    for r in rows:
        by.setdefault((r.P, r.strategy), {})[r.middle] = r
    head = f"{'P':>3}  {'strategy':<20}"
    for m in middles:
        head += f" | m={m} paper MP DP PP   random(all) MP/DP/PP"
    L = [f"Routability of 3D-parallel phases on FRED_m(P): paper placement (port = mp + a*(pp + c*dp)) "
         f"and {samples} random placements", head, "-" * len(head)]
    for (P, strat), ms in by.items():
        line = f"{P:>3}  {ms[middles[0]].name:<20}"
        for m in middles:
            r = ms[m]
            pap = " ".join(f"{_cell(r, ph):>4}" for ph in ("MP", "DP", "PP"))
            rnd = "/".join("-" if ph not in r.paper else str(r.random_ok[ph]) for ph in ("MP", "DP", "PP"))
            line += f" |    {pap}   {r.random_all:>3}/{r.samples:<3}     {rnd:<9}"
        L.append(line.rstrip())
    L.append("")
    for m in middles:
        rs = [r for r in rows if r.middle == m]
        bad_paper = [r for r in rs if not all(r.paper.values())]
        n_rand = sum(r.samples for r in rs)
        ok_rand = sum(r.random_all for r in rs)
        L.append(f"m={m}: paper placement routes every phase for {len(rs) - len(bad_paper)}/{len(rs)} strategies"
                 + (f" (fails: {', '.join(f'P={r.P} {r.name}' for r in bad_paper)})" if bad_paper else "")
                 + f"; random placements route every phase in {ok_rand}/{n_rand} cases")
    if counterexamples:
        cx = [c for r in rows for c in r.counterexamples]
        paper_cx = [c for c in cx if c.placement == "paper"]
        rand_cx = [c for c in cx if c.placement != "paper"]
        if paper_cx or rand_cx:
            L.append("")
            L.append("Counterexamples (ports listed for workers in the paper's order, i.e. worker "
                     "(mp, dp, pp) sorted by mp + a*(pp + c*dp)):")
        for c in paper_cx + rand_cx[:12]:
            a, b, cc = c.strategy
            L.append(f"  P={c.P} m={c.middle} MP({a})-DP({b})-PP({cc}) {c.placement}: phase {c.phase}, "
                     f"flows {'  '.join(c.flows)}")
            if c.placement != "paper":
                L.append(f"      placement {c.ports}")
        if len(rand_cx) > 12:
            L.append(f"  ... and {len(rand_cx) - 12} more (random-placement) counterexamples")
    return "\n".join(L)


def _counterexample_json(c) -> dict:
    # the published keys of ``fred route --study --json`` (the middle count is "m" here)
    return {"P": c.P, "m": c.middle, "strategy": c.strategy, "placement": c.placement,
            "ports": c.ports, "phase": c.phase, "flows": c.flows, "message": c.message}


def study_json(rows) -> list:
    return [{"ports": r.P, "strategy": r.name, "middle": r.middle, "paper": r.paper,
             "random_ok": r.random_ok, "random_all": r.random_all, "samples": r.samples,
             "counterexamples": [_counterexample_json(c) for c in r.counterexamples]} for r in rows]
