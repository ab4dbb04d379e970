"""``make run``'s closing verdict (fred.run.verdict): every figure comes from the estimate rows
and the scan it is given, none is typed (issue 24 item 4)."""

from __future__ import annotations

from types import SimpleNamespace

import fred.model.training.scanner as S
from fred.run import _k, verdict


def _fake_map(curves):
    """Answer every scan job from speedup curves: the mesh takes 1 s, a fabric 1 / curve(k) s
    (as tests/model/test_scan.py does)."""
    def point(j):
        t = 1.0 if j.fabric == "mesh" else 1.0 / curves[j.fabric](j.k)
        return S.Point(j.workload, j.fabric, j.k, j.samples, iteration_time=t, compute_time=t, exposed={})

    def run(fn, jobs, desc="", label=None):
        if fn is S.run_series:
            return [[point(j) for j in sj.points] for sj in jobs]
        return [S.run_bisection(j, point=point) for j in jobs]
    return run


def _inputs(slope_c, slope_d):
    curves = {"fred-c": lambda k: 1 + k / slope_c, "fred-d": lambda k: 1 + k / slope_d}
    r = S.scan(["resnet-152"], sorted(curves), S.k_grid(1, 1000, 10), map_fn=_fake_map(curves))
    rows = [SimpleNamespace(workload="resnet-152", fabric=f, speedup=1.0 if f == "mesh" else curves[f](1.0))
            for f in ("mesh", "fred-c", "fred-d")]
    return rows, r


def test_verdict_reads_its_figures_off_the_runs():
    for slopes in ((100, 50), (400, 20)):
        rows, r = _inputs(*slopes)
        text = "\n".join(verdict(rows, r, [("build/scan.png", "speedup vs NPU speed")]))
        # what FRED saves at k = 1
        for e in rows[1:]:
            assert f"{1 - 1 / e.speedup:.1%}" in text
        # the crossovers, as the scan found them
        for x in r.crossovers:
            if x.k_from is not None:
                assert f"k {_k(x.k_from)}" in text, (x, text)
        # the k of each paper cell, as the scan found it
        for c in r.paper_cells:
            assert c.reached and f"k {_k(c.k)} (speedup {c.speedup_at_k:.2f})" in text, (c, text)
        assert "build/scan.png (speedup vs NPU speed)" in text


def test_verdict_says_never_and_not_reached():
    rows, r = _inputs(1e9, 1e9)       # no speedup anywhere
    text = "\n".join(verdict(rows, r, []))
    assert "never / never" in text and "not reached (at most 1.00" in text
