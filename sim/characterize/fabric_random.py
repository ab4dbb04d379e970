"""Random routable flow sets of FRED_m(P), for the fabric benches (cocotb: tests/sim/test_fabric_sim.py;
compiled: :mod:`fred.sim.soak.fabric`).

:func:`random_flow_set` draws one routable phase of a flow kind (all-reduce, reduce, multicast,
unicast, or mixed: several concurrent flows of mixed kinds, disjoint in ports);
:func:`case_phases` the phases of one regression case: one phase per kind, random mixed sets, a
full-width permutation and compound collectives (reduce-scatter, all-gather, all-to-all as phase
sequences with reconfiguration in between). Everything derives from the seed.
"""

from __future__ import annotations

import random

from fred.hdl.netlist import expand
from fred.hdl.routing import route

from .fabric import kind_flows

__all__ = ["random_flow_set", "case_phases"]


def _routable(P, m, flows):
    try:
        route(P, m, flows)
        return True
    except ValueError:
        return False


def _subset(rng, ports, lo=2):
    k = rng.randint(min(lo, len(ports)), len(ports))
    return sorted(rng.sample(list(ports), k))


def _fmt(ins, outs):
    return ",".join(map(str, sorted(ins))) + ">" + ",".join(map(str, sorted(outs)))


def random_flow_set(P, m, rng, kind):
    """One routable phase (list of flow strings) of ``kind``: all-reduce, reduce, multicast,
    unicast (a permutation of a random port subset) or mixed (several concurrent flows of mixed
    kinds, disjoint in ports)."""
    for _ in range(200):
        if kind == "all-reduce":
            g = _subset(rng, range(P))
            flows = [_fmt(g, g)]
        elif kind == "reduce":
            flows = [_fmt(_subset(rng, range(P)), [rng.randrange(P)])]
        elif kind == "multicast":
            flows = [_fmt([rng.randrange(P)], _subset(rng, range(P)))]
        elif kind == "unicast":
            src = _subset(rng, range(P), 1)
            dst = rng.sample(range(P), len(src))
            flows = [f"{a}>{b}" for a, b in zip(src, dst)]
        elif kind == "mixed":
            ins, outs = list(range(P)), list(range(P))
            rng.shuffle(ins)
            rng.shuffle(outs)
            flows = []
            while ins and outs and len(flows) < P:
                k = rng.choice(["unicast", "reduce", "multicast", "all-reduce", "general"])
                if k == "all-reduce":
                    both = [p for p in ins if p in outs]
                    if len(both) < 2:
                        continue
                    g = both[:rng.randint(2, min(4, len(both)))]
                    fi, fo = g, g
                else:
                    ni = 1 if k in ("unicast", "multicast") else rng.randint(1, min(3, len(ins)))
                    no = 1 if k in ("unicast", "reduce") else rng.randint(1, min(3, len(outs)))
                    fi, fo = ins[:ni], outs[:no]
                ins = [p for p in ins if p not in fi]
                outs = [p for p in outs if p not in fo]
                flows.append(_fmt(fi, fo))
                if rng.random() < 0.2:
                    break
        else:
            raise ValueError(kind)
        if _routable(P, m, flows):
            return flows
    raise AssertionError(f"no routable {kind} flow set found for FRED_{m}({P})")


def case_phases(P, m, seed, n_random=6):
    """Phases of one regression case: one phase per flow kind, random mixed sets, then compound
    collectives (phase sequences with reconfiguration in between)."""
    rng = random.Random(seed)
    phases, labels = [], []
    for kind in ("all-reduce", "reduce", "multicast", "unicast"):
        phases.append(random_flow_set(P, m, rng, kind))
        labels.append(kind)
    for j in range(n_random):
        phases.append(random_flow_set(P, m, rng, "mixed"))
        labels.append(f"mixed {j}")
    # full-width permutation (All-to-All step) and every-port All-Reduce
    phases.append(kind_flows("unicast", P, rng))
    labels.append("full permutation")
    for name in ("reduce-scatter", "all-gather", "all-to-all"):
        g = _subset(rng, range(P))[:4] if P > 2 else [0, 1]
        if len(g) < 2:
            g = [0, 1]
        for ph in expand(name, g):
            if _routable(P, m, ph.flows):
                phases.append([str(f) for f in ph.flows])
                labels.append(ph.label)
    return phases, labels
