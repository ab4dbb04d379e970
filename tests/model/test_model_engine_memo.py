"""The flow simulator's two memories change nothing: a repeated collective replays the tasks its
first expansion made, and the rate solver reuses the rates of a set of flows it has seen.

Each test runs the same work with the memory and without it (every collective expanded afresh;
every rate solved afresh in the order the flows became active) and asserts the same task graph
and the same start/finish times."""

import numpy as np
import pytest

from fred.model.network import engine
from fred.model.collectives.flowsim import Sim
from fred.model.collectives.strategy import groups


def _workload(sim, seed):
    """Collectives of several kinds, each repeated with the same and other sizes, chained and
    overlapping, with compute delays between them and two priority classes."""
    rng = np.random.default_rng(seed)
    mp = groups("MP(5)-DP(2)-PP(2)", "MP")
    dp = groups("MP(5)-DP(2)-PP(2)", "DP")
    last = []
    for layer in range(4):
        d = sim.delay(float(rng.uniform(1e-6, 5e-6)), deps=last)
        a = sim.collective("all-reduce", mp, 2e6 * (1 + layer % 2), deps=[d])
        b = sim.collective("all-gather", dp, 1e6, deps=[d], priority=1)
        c = sim.collective("reduce-scatter", mp, 4e6, deps=[a])
        last = [b, c]
    return last


def _run(fabric, seed, forget_blocks=False, direct_rates=False):
    sim = Sim(fabric)
    if forget_blocks:
        sim.plan_cache = _ForgetBlocks()
    _workload(sim, seed)
    # direct_rates: the rate solve without the engine's memory or its grouping: every active
    # flow listed on its own, solved afresh each time
    res = engine.run(sim, remember_rates=False) if direct_rates else sim.run()
    return sim, res


class _ForgetBlocks(dict):
    """A plan cache that keeps plans but never a recorded block (every collective is expanded)."""

    def __setitem__(self, key, value):
        if isinstance(key, tuple) and key and key[0] == "block":
            return
        super().__setitem__(key, value)


@pytest.mark.parametrize("fabric", ["mesh", "fred-a", "fred-d"])
@pytest.mark.parametrize("seed", [1, 2])
def test_replayed_collectives_make_the_same_task_graph(fabric, seed):
    a, _ = _run(fabric, seed)
    b, _ = _run(fabric, seed, forget_blocks=True)
    ga, gb = a.arrays(), b.arrays()
    for name in ("kind", "duration", "nbytes", "path", "priority", "label_of", "pred", "succ"):
        assert np.array_equal(getattr(ga, name), getattr(gb, name)), name
    assert ga.spans == gb.spans


@pytest.mark.parametrize("fabric", ["mesh", "fred-b", "fred-d"])
def test_remembered_rates_give_the_same_times(fabric):
    _, ra = _run(fabric, 3)
    _, rb = _run(fabric, 3, direct_rates=True)
    assert ra.events == rb.events
    # summing shared capacity in another order may move the last bit of a rate
    np.testing.assert_allclose(ra.finish, rb.finish, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ra.start, rb.start, rtol=1e-12, atol=0)


def test_a_replayed_collective_still_checks_its_group():
    sim = Sim("mesh")
    sim.collective("all-reduce", [0, 1, 2, 3], 1e6)
    with pytest.raises(ValueError, match="99"):
        sim.collective("all-reduce", [0, 1, 2, 99], 1e6)
    # the same group and size again: a replay, which still depends on what it is given
    d = sim.delay(1e-3)
    j = sim.collective("all-reduce", [0, 1, 2, 3], 1e6, deps=[d])
    res = sim.run()
    assert res.start[j] >= 1e-3


@pytest.mark.parametrize("seed", range(6))
def test_flows_with_a_multiplicity_get_the_rates_of_their_copies(seed):
    """maxmin_rates / priority_rates with ``mult``: the same rates as the copies listed one by
    one (random flows over random links, some sharing, with caps, classes and switches)."""
    rng = np.random.default_rng(seed)
    L, F = 12, 9
    cap = rng.uniform(1, 10, L)
    paths = [rng.choice(L, size=rng.integers(1, 4), replace=False) for _ in range(F)]
    fcap = np.where(rng.random(F) < 0.3, rng.uniform(0.5, 3, F), np.inf)
    prio = rng.integers(0, 3, F)
    mult = rng.integers(1, 5, F)
    ef = np.concatenate([np.full(p.size, i) for i, p in enumerate(paths)])
    el = np.concatenate(paths)
    # the copies, one by one
    rep = np.repeat(np.arange(F), mult)
    off = np.r_[0, np.cumsum(mult)[:-1]]
    ef_full = np.concatenate([off[i] + np.repeat(np.arange(mult[i]), paths[i].size) for i in range(F)])
    el_full = np.concatenate([np.tile(paths[i], mult[i]) for i in range(F)])
    got = engine.maxmin_rates(ef, el, F, cap, fcap, mult)
    want = engine.maxmin_rates(ef_full, el_full, rep.size, cap, fcap[rep])
    assert np.array_equal(np.repeat(got, mult), want)
    sw_a = np.where(rng.random(L) < 0.5, rng.integers(0, 3, L), -1)
    sw_b = np.where(rng.random(L) < 0.5, rng.integers(0, 3, L), -1)
    got = engine.priority_rates(ef, el, F, cap, fcap, prio, sw=(sw_a, sw_b, 3), mult=mult)
    want = engine.priority_rates(ef_full, el_full, rep.size, cap, fcap[rep], prio[rep], sw=(sw_a, sw_b, 3))
    np.testing.assert_allclose(np.repeat(got, mult), want, rtol=1e-12, atol=1e-12)
