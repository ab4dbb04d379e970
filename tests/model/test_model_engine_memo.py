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


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_solve_gives_the_numpy_solvers_rates_to_the_bit(seed):
    """The engine's compiled solve of active rate groups (maxmin.group_rates) against
    maxmin_rates / priority_rates on the same groups: equal, not close (random paths over
    random links, caps, classes, switches, multiplicities; every mode)."""
    from fred.model.network.maxmin import ARBITRATED, PLAIN, PRIORITY, group_rates

    rng = np.random.default_rng(100 + seed)
    L, P = 14, 11
    cap = rng.uniform(1, 10, L)
    paths = [np.sort(rng.choice(L, size=rng.integers(1, 5), replace=False)) for _ in range(P)]
    p_ptr = np.r_[0, np.cumsum([p.size for p in paths])].astype(np.int64)
    p_flat = np.concatenate(paths).astype(np.int64)
    p_cap = np.where(rng.random(P) < 0.3, rng.uniform(0.5, 3, P), np.inf)
    g_path = rng.permutation(P).astype(np.int64)          # group -> path
    g_prio = rng.integers(0, 3, P).astype(np.int64)
    ag = np.sort(rng.choice(P, size=8, replace=False)).astype(np.int64)
    mult = rng.integers(1, 4, ag.size).astype(np.int64)
    sw_a = np.where(rng.random(L) < 0.5, rng.integers(0, 3, L), -1).astype(np.int64)
    sw_b = np.where(rng.random(L) < 0.5, rng.integers(0, 3, L), -1).astype(np.int64)
    ef = np.concatenate([np.full(paths[g_path[g]].size, i) for i, g in enumerate(ag)])
    el = np.concatenate([paths[g_path[g]] for g in ag])
    fcap = p_cap[g_path[ag]]
    want = {PLAIN: engine.maxmin_rates(ef, el, ag.size, cap, fcap, mult),
            PRIORITY: engine.priority_rates(ef, el, ag.size, cap, fcap, g_prio[ag], mult=mult),
            ARBITRATED: engine.priority_rates(ef, el, ag.size, cap, fcap, g_prio[ag], sw=(sw_a, sw_b, 3), mult=mult)}
    for mode, w in want.items():
        got = group_rates(ag, mult, g_path, g_prio, p_ptr, p_flat, p_cap, cap, mode, sw_a, sw_b, 3)
        assert np.array_equal(got, w), (mode, got, w)


@pytest.mark.parametrize("fabric", ["mesh", "fred-d"])
def test_a_recorded_schedule_builds_the_graph_its_calls_make_one_by_one(fabric):
    """A tape's graph (repeated collectives and delays appended in batches, paths from the
    process-wide path data) is the graph the same calls made one by one on a Sim give: the same
    tasks, edges, labels, spans and paths, in the same order."""
    from fred.model.network import paths
    from fred.model.network.topology import build_fabric
    from fred.model.schedule import tape as T

    topo = build_fabric(fabric)
    rec = T.Tape(topo)
    _workload(rec, 3)
    _workload(rec, 4)                       # again: every collective a repeat
    built = T._Built(rec, topo)             # path data from the memo (the topology seen before)
    paths._PATH_MEMO.clear()
    sim, real, dur = Sim(topo), [], iter(rec.durations)
    for c in rec.calls:
        if c[0] == "d":
            real.append(sim.delay(next(dur), deps=[real[d] for d in c[2]], label=c[1]))
        else:
            _, op, grp, nbytes, deps, kw = c
            group = [list(g) if isinstance(g, tuple) else g for g in grp]
            real.append(sim.collective(op, group, nbytes, deps=[real[d] for d in deps], **dict(kw)))
    a, b = built.sim.arrays(), sim.arrays()
    for f in ("kind", "nbytes", "path", "priority", "label_of", "pred", "succ"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    # (the tape's graph holds its delays' durations apart: they are swapped in for each run)
    assert np.array_equal(np.delete(a.duration, built.delays), np.delete(b.duration, built.delays))
    assert a.labels == b.labels and sorted(a.spans) == sorted(b.spans)
    assert len(a.path_links) == len(b.path_links)
    assert all(np.array_equal(x, y) for x, y in zip(a.path_links, b.path_links))
    assert a.path_latency == b.path_latency and a.path_cap == b.path_cap
    assert np.array_equal(built.real, real)
    assert np.array_equal(T.simulate(rec, topo)[1].finish, sim.run().finish)


@pytest.mark.parametrize("fabric", ["mesh", "fred-a", "fred-d"])
def test_pieces_copied_from_the_second_equal_pieces_built_phase_by_phase(fabric, monkeypatch):
    """run_plan adds pieces 2.. of a stream as copies of piece 1: the same graph as running every
    phase for every piece (many pieces, several streams, I/O trees and rings, two classes)."""
    from fred.model.collectives import api, phases

    def phase_by_phase(b, plan, st0, nbytes, chunks):
        for frac, phs in plan:
            D = nbytes * frac / chunks
            prev = [[] for _ in phs]
            for _c in range(chunks):
                st = st0
                for j, ph in enumerate(phs):
                    if getattr(ph, "concurrent_chunks", False):
                        st, _ = ph(b, st, D)
                    else:
                        st, sends = ph(b, st + prev[j], D)
                        prev[j] = sends

    def build():
        sim = Sim(fabric)
        d = sim.delay(1e-6)
        a = sim.collective("io-broadcast", list(range(20)), 3e6, deps=[d], chunks=16)
        r = sim.collective("all-reduce", groups("MP(5)-DP(2)-PP(2)", "MP"), 2e6, deps=[a], chunks=5, priority=1)
        sim.collective("io-reduce", [[0, 1, 2, 3], [4, 5, 6, 7]], 1e6, deps=[r], chunks=7)
        sim.collective("all-gather", list(range(10)), 1e6, deps=[d], chunks=3)
        return sim

    new = build().arrays()
    monkeypatch.setattr(api, "run_plan", phase_by_phase)
    old = build().arrays()
    for f in ("kind", "duration", "nbytes", "path", "priority", "label_of", "pred", "succ"):
        assert np.array_equal(getattr(new, f), getattr(old, f)), f
    assert phases.run_plan is not phase_by_phase
