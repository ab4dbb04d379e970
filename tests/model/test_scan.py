"""`fred scan` and the job runner: the grid, the paper-cell bisection and the crossover on
synthetic speedup curves (exact answers known), the CLI's text / JSON / plot, one-line errors, and
a Dask run with 2 worker processes that must equal the serial run."""

import json
import math

import pytest

from fred import FredError
from fred.cli import main
from fred.jobs import JobRunner, fred_origin
from fred.model.training import scanner as S


# ---- grid ----------------------------------------------------------------------------------------

def test_k_grid_log_spaced_inclusive():
    ks = S.k_grid()
    assert len(ks) == S.K_POINTS >= 20
    assert ks[0] == pytest.approx(0.25) and ks[-1] == pytest.approx(1000)
    ratios = [b / a for a, b in zip(ks, ks[1:])]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-9)
    assert S.k_grid(2, 2, 1) == [2]


@pytest.mark.parametrize("args, match", [((0, 10, 5), "--k-min 0 is too small"),
                                         ((10, 1, 5), "--k-max 1 is too small"),
                                         ((1, 10, 0), "--points 0 is too small")])
def test_k_grid_rejects(args, match):
    with pytest.raises(ValueError, match=match):
        S.k_grid(*args)


def test_scaled_npu_scales_the_roofline_only():
    from fred.model.workload.compute import default_npu

    n = default_npu()
    m = S.scaled_npu(n, 8)
    assert m.peak_flops == 8 * n.peak_flops and m.hbm_bw == 8 * n.hbm_bw
    assert m.hbm_capacity == n.hbm_capacity and m.utilisation == n.utilisation


# ---- bisection and crossover on synthetic curves --------------------------------------------------

def _fake_map(curves):
    """A map_fn that answers every job from speedup curves instead of simulating: the mesh takes
    1 s, a fabric 1 / curve(k) s. Records how many jobs ran."""
    calls = []

    def point(j):
        t = 1.0 if j.fabric == "mesh" else 1.0 / curves[j.fabric](j.k)
        return S.Point(j.workload, j.fabric, j.k, j.samples, iteration_time=t, compute_time=t, exposed={})

    def run(fn, jobs, desc="", label=None):
        if fn is S.run_series:
            out = [[point(j) for j in sj.points] for sj in jobs]
        else:
            assert fn is S.run_bisection
            out = [S.run_bisection(j, point=point) for j in jobs]
        calls.append(len(jobs))
        return out
    run.calls = calls
    return run


def _scan(curves, ks, workload="resnet-152"):
    fab = sorted(curves)
    return S.scan([workload], fab, ks, map_fn=_fake_map(curves))


def test_bisection_finds_the_lower_band_edge():
    # Fred-C: speedup = 1 + k / 100 reaches 1.41 * 0.9 = 1.269 at k = 26.9
    edge = (1.41 * (1 - S.PAPER_BAND) - 1) * 100
    r = _scan({"fred-c": lambda k: 1 + k / 100, "fred-d": lambda k: 1.0}, S.k_grid(1, 1000, 7))
    c = next(c for c in r.paper_cells if c.fabric == "fred-c")
    assert c.reached and c.found_by == "bisection"
    assert edge <= c.k <= edge * (1 + 2 * S.REFINE_RTOL)
    assert S.band_status(c.speedup_at_k, c.paper_speedup) == "in"
    d = next(c for c in r.paper_cells if c.fabric == "fred-d")
    assert not d.reached and d.max_speedup == pytest.approx(1.0)


def test_bisection_when_the_curve_jumps_over_the_band():
    # a step from 1.0 to 3.0 at k = 40: no grid point and no k is in the band; the crossing is
    # bisected, nothing is found, and the cell is 'not reached' with the max speedup
    r = _scan({"fred-d": lambda k: 3.0 if k >= 40 else 1.0}, [1, 10, 100, 1000])
    c = r.paper_cells[0]
    assert not c.reached and c.max_speedup == pytest.approx(3.0) and c.evaluated
    assert c.bracket[1] / c.bracket[0] <= 1 + S.REFINE_RTOL
    assert c.bracket[0] < 40 <= c.bracket[1]
    # a steep but continuous curve across the band is caught between grid points
    r = _scan({"fred-d": lambda k: 1.0 + 2.0 / (1 + math.exp(-(k - 40) / 3))}, [1, 10, 100, 1000])
    c = r.paper_cells[0]
    assert c.reached and c.found_by == "bisection" and 36 < c.k < 40


def test_grid_hit_at_the_lowest_k_is_not_refined():
    r = _scan({"fred-d": lambda k: 1.76}, [1, 2, 4])
    c = r.paper_cells[0]
    assert c.reached and c.k == 1 and c.found_by == "grid (lowest k scanned)" and not c.evaluated


def test_no_refine_stays_on_the_grid():
    f = {"fred-c": lambda k: 1 + k / 300}
    r = S.scan(["resnet-152"], ["fred-c"], [1, 10, 100], refine=False, map_fn=_fake_map(f))
    c = r.paper_cells[0]
    assert c.reached and c.k == 100 and c.found_by == "grid"


def test_crossover_first_k_and_run():
    ks = [1, 2, 4, 8, 16, 32]
    # saving 1 - 1/s: >= 10% from s >= 1.111, >= 25% from s >= 1.333; rises then falls
    sp = [1.0, 1.12, 1.4, 1.5, 1.2, 1.05]
    x10 = S.crossover("w", "fred-d", 16, 0.10, ks, sp)
    x25 = S.crossover("w", "fred-d", 16, 0.25, ks, sp)
    assert (x10.k_from, x10.k_until, x10.holds_to_k_max) == (2, 16, False)
    assert (x25.k_from, x25.k_until) == (4, 8)
    assert x10.k_at_max == 8 and x10.max_saving == pytest.approx(1 - 1 / 1.5)
    never = S.crossover("w", "fred-a", 16, 0.10, ks, [1.0] * 6)
    assert never.k_from is None and not never.holds_to_k_max


# ---- real model, CLI -----------------------------------------------------------------------------

def test_cli_text_json_plot(tmp_path, capsys):
    png = tmp_path / "scan.png"
    argv = ["scan", "--workers", "0", "-w", "resnet-152", "-f", "fred-d", "--k-min", "1", "--k-max", "100",
            "--points", "3", "--no-refine"]
    assert main(argv + ["--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "Paper cells" in text and "Crossover" in text and "resnet-152, 16 samples per replica" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["scan.png"]        # no temporary file left
    assert main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "fred-scan" and doc["schema_version"] == 2
    assert doc["fabrics"] == ["mesh", "fred-d"] and len(doc["results"]) == 6
    p = doc["results"][-1]
    assert {"iteration_time_s", "compute_time_s", "exposed_s", "speedup_vs_mesh"} <= set(p)
    assert doc["paper_cells"][0]["paper_speedup"] == 1.76
    assert {x["saving"] for x in doc["crossover"]} == set(S.SAVINGS)


@pytest.mark.parametrize("argv, match", [
    (["--k-min", "0"], "--k-min 0 is too small"),
    (["--samples", "x"], "--samples 'x' is not a whole number"),
    (["--workers", "-1"], "--workers -1 is too small"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "exclude each other"),
    (["--plot", "scan.txt"], "--plot 'scan.txt': file type '.txt'"),
])
def test_cli_errors_are_one_line(argv, match, capsys):
    assert main(["scan", "-w", "resnet-152", "--points", "2"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fred: error:") and match in err[0], err


def test_no_progress_when_stdout_is_not_a_terminal(capsys):
    assert main(["scan", "--workers", "0", "-w", "resnet-152", "-f", "fred-d", "--points", "2", "--no-refine"]) == 0
    assert capsys.readouterr().err == ""


def test_worker_code_must_match():
    class FakeClient:
        def run(self, fn):
            return {"tcp://127.0.0.1:9": {**fred_origin(), "digest": "0" * 64, "path": "/elsewhere/fred"}}

    r = JobRunner(workers=1)
    r.client = FakeClient()
    with pytest.raises(FredError, match=r"Dask worker tcp://127.0.0.1:9 runs fred .* from /elsewhere/fred"):
        r._check_workers()


def test_serial_job_error_names_the_job():
    with JobRunner(workers=0) as r:
        with pytest.raises(FredError, match=r"^job -1: math domain error"):
            r.map(math.sqrt, [4, -1], label=lambda j: f"job {j}")


@pytest.mark.parametrize("dask_local", [False, True], ids=["forked-pool", "dask-localcluster"])
def test_two_workers_equal_serial(dask_local):
    """Two local worker processes (the default forked pool, and a Dask LocalCluster): a small
    scan with bisection and a sweep give exactly the serial results; a job failing on a worker
    becomes a FredError naming it."""
    from fred.commands.sweep import sweep

    kw = dict(workloads=["resnet-152"], fabrics=["fred-d"], k_values=[1, 10, 100])
    serial = S.to_json(S.scan(**kw))
    drop_time = lambda rows: [{**r, "estimate": {**r["estimate"].to_dict(), "sim_seconds": 0}
                               if r["estimate"] else None} for r in rows]
    sw_serial = drop_time(sweep("transformer-17b", ("mesh",), 16))
    with JobRunner(workers=2, dask_local=dask_local) as runner:
        assert runner.describe() == ("Dask LocalCluster, 2 worker processes" if dask_local
                                     else "local pool, 2 worker processes (forked)")
        parallel = S.to_json(S.scan(**kw, map_fn=runner.map))
        sw_parallel = drop_time(sweep("transformer-17b", ("mesh",), 16, map_fn=runner.map))
        with pytest.raises(FredError, match=r"^sqrt of -1: math domain error"):
            runner.map(math.sqrt, [1, -1, 9], label=lambda j: f"sqrt of {j}")
    assert parallel == serial
    assert any(c["found_by"] == "bisection" for c in serial["paper_cells"])
    assert sw_parallel == sw_serial
    assert runner.pool is None and runner.client is None          # workers joined on leaving


def test_forked_pool_runs_one_job_in_process():
    """A map of one job needs no worker: it runs in this process (no pool is started)."""
    with JobRunner(workers=2) as runner:
        assert runner.map(abs, [-3]) == [3]
        assert runner.pool is None
