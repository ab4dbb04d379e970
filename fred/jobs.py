"""Independent estimate jobs run in parallel: forked local worker processes, or Dask ``distributed``.

``fred scan`` and ``fred sweep`` evaluate many independent (workload, fabric, NPU, strategy) cells.
:class:`JobRunner` maps a function over such jobs:

* ``workers=None`` (default): a pool of worker processes on this machine, one per core, *forked*
  from this process once it has imported the model and loaded its compiled engine
  (:func:`fred.model.network.warm`), so a worker starts with nothing to import or load (the
  simulator is pure Python plus compiled loops: threads would share one interpreter lock);
* ``workers=N > 0``: such a pool of N worker processes;
* ``workers=0``: serial, in this process -- the reference the parallel runs must match exactly;
  a map of one job also runs in this process (a worker would only add its start-up);
* ``scheduler="tcp://host:port"``: submit to an already running Dask cluster;
* ``dask_local=True``: a :class:`distributed.LocalCluster` of ``workers`` spawned worker processes
  (loopback only), the former default: each worker imports Dask, numpy, numba and fred afresh,
  which costs more CPU than the jobs of a default ``fred sweep`` (measured in docs/training.md).
  Also the pool's stand-in where processes cannot be forked.

Results come back in job order whatever order they finish in, so a parallel run returns the
same list as a serial one. Progress (tqdm) is shown as jobs finish when ``progress`` is true.

Every Dask worker must run the same fred as this process: on connecting, the runner asks each
worker for its fred version and a digest of the fred sources (:func:`fred_origin`) and refuses,
with a one-line :class:`fred.FredError`, a worker whose code differs (a forked worker runs this
process's code by construction). A job that raises on a worker becomes a
:class:`fred.FredError` naming the job and the exception, which the CLI prints as one
``fred: error:`` line.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from fred import FredError, __version__
from fred.contract.checks import check_int, check_name

#: the files of the fred, fred.contract and fred.model folders that fred_origin hashes (the code
#: and data a job runs)
_SOURCE_SUFFIXES = (".py", ".json", ".yml", ".yaml", ".csv")
#: seconds to wait for a scheduler given by address
CONNECT_TIMEOUT_S = 20
#: Dask settings for our runs (Dask's defaults are 30 s to connect and 30 s without a reply on a
#: link; on a machine shared with other jobs a busy worker can miss that)
DASK_CONFIG = {"distributed.comm.timeouts.connect": "60s", "distributed.comm.timeouts.tcp": "300s",
               # a job is seconds of CPU-bound work: no statistical profiler sampling every worker
               # thread each 10 ms, and the housekeeping ticks (memory, system monitor, event-loop
               # check) at 1-2 s instead of every 20-500 ms -- their cost is CPU the jobs do not get
               "distributed.worker.profile.enabled": False,
               "distributed.worker.memory.monitor-interval": "1s",
               "distributed.admin.system-monitor.interval": "2s",
               "distributed.admin.tick.interval": "1s"}


def _package_dirs():
    import fred.contract
    import fred.model

    return [Path(m.__file__).resolve().parent for m in (sys.modules["fred"], fred.contract, fred.model)]


def fred_origin() -> dict:
    """This process's fred: version, package folder and a SHA-256 over its source and data files."""
    h = hashlib.sha256()
    dirs = _package_dirs()
    for d in dirs:
        for path in sorted(d.rglob("*")):
            if path.suffix in _SOURCE_SUFFIXES and "__pycache__" not in path.parts and path.is_file():
                h.update(str(path.relative_to(d)).encode())
                h.update(b"\0")
                h.update(path.read_bytes())
                h.update(b"\0")
    return {"version": __version__, "path": str(dirs[0]), "digest": h.hexdigest()}


def _worker_init():
    """A forked worker leaves Ctrl-C to this process (which stops the pool): no traceback per worker."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def default_workers() -> int:
    """Worker processes of the default local pool: the cores this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class JobRunner:
    """Context manager mapping a function over independent jobs (see the module docstring).

    >>> with JobRunner(workers=0) as r:
    ...     r.map(abs, [-1, 2, -3])
    [1, 2, 3]
    """

    def __init__(self, workers: int | None = None, scheduler: str | None = None, progress: bool = False,
                 dask_local: bool = False):
        if workers is not None:
            workers = check_int("--workers", workers, low=0, high=4096)
        if scheduler is not None:
            scheduler = check_name("--scheduler", scheduler)
            if workers is not None:
                raise ValueError(f"--workers {workers} and --scheduler {scheduler!r} exclude each other "
                                 "(the cluster at the scheduler has its own workers)")
        self.scheduler = scheduler
        self.workers = default_workers() if workers is None and scheduler is None else workers
        self.progress = bool(progress)
        self.client = None
        self.cluster = None
        self.pool = None
        # the local pool forks; where a process cannot fork, a Dask LocalCluster stands in
        self.dask_local = bool(dask_local) or (not self.serial and scheduler is None and not _can_fork())

    @property
    def serial(self) -> bool:
        return self.scheduler is None and self.workers == 0

    def describe(self) -> str:
        if self.serial:
            return "serial, in process"
        if self.scheduler:
            return f"Dask scheduler {self.scheduler}"
        n = f"{self.workers} worker process{'es' if self.workers != 1 else ''}"
        return f"Dask LocalCluster, {n}" if self.dask_local else f"local pool, {n} (forked)"

    @property
    def uses_dask(self) -> bool:
        return self.scheduler is not None or (self.dask_local and not self.serial)

    # -- life cycle ------------------------------------------------------------------------------

    def __enter__(self):
        if not self.uses_dask:
            return self             # serial, or the forked pool (made by the first map that needs it)
        import logging

        import dask
        from distributed import Client, LocalCluster

        # a loaded machine can starve the scheduler for seconds: be patient rather than drop links
        dask.config.set(DASK_CONFIG)
        try:
            if self.scheduler:
                self.client = Client(self.scheduler, timeout=CONNECT_TIMEOUT_S)
            else:
                self.cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                            host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                            silence_logs=logging.CRITICAL)
                self.client = Client(self.cluster)
        except (OSError, TimeoutError) as exc:
            self.close()
            where = f"the Dask scheduler at {self.scheduler}" if self.scheduler else "a local Dask cluster"
            raise FredError(f"cannot start or reach {where}: {exc}") from exc
        try:
            self._check_workers()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close(cancel=exc[0] is not None)
        return False

    def close(self, cancel: bool = False):
        if self.pool is not None:
            pool, self.pool = self.pool, None
            if cancel:
                for proc in list(getattr(pool, "_processes", {}).values()):
                    proc.terminate()          # our own workers, by their process objects
            pool.shutdown(wait=True, cancel_futures=True)   # joined: their CPU counts as ours
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None

    def _check_workers(self):
        here = fred_origin()
        there = self.client.run(fred_origin)
        if not there:
            raise FredError(f"{self.describe()} has no workers")
        for addr, origin in sorted(there.items()):
            if origin["version"] != here["version"] or origin["digest"] != here["digest"]:
                raise FredError(f"Dask worker {addr} runs fred {origin['version']} from {origin['path']} "
                                f"(source digest {origin['digest'][:12]}), this process fred {here['version']} from "
                                f"{here['path']} ({here['digest'][:12]}): install the same fred on every worker")

    # -- work ------------------------------------------------------------------------------------

    def map(self, fn, jobs, desc: str = "jobs", label=None) -> list:
        """``[fn(job) for job in jobs]``, on the workers; ``label(job)`` names a job in errors."""
        jobs = list(jobs)
        label = label or repr
        if len(jobs) > 1 and not self.serial and not self.uses_dask:
            self._start_pool()      # before the progress bar: fork with no other thread running
        bar = self._bar(len(jobs), desc)
        try:
            if self.serial or len(jobs) == 0 or (len(jobs) == 1 and not self.uses_dask):
                return self._map_serial(fn, jobs, label, bar)
            if self.uses_dask:
                return self._map_dask(fn, jobs, label, bar)
            return self._map_pool(fn, jobs, label, bar)
        finally:
            if bar is not None:
                bar.close()

    def _bar(self, total, desc):
        if not self.progress or total == 0:
            return None
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="job", file=sys.stderr, leave=False, dynamic_ncols=True)

    @staticmethod
    def _failed(job_label, exc) -> FredError:
        if isinstance(exc, (FredError, ValueError)):
            return FredError(f"{job_label}: {exc}")
        return FredError(f"{job_label}: {type(exc).__name__}: {exc}")

    def _map_serial(self, fn, jobs, label, bar):
        out = []
        for job in jobs:
            try:
                out.append(fn(job))
            except Exception as exc:
                raise self._failed(label(job), exc) from exc
            if bar is not None:
                bar.update(1)
        return out

    def _start_pool(self):
        if self.pool is not None:
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from fred.model.network import warm

        warm()                      # the compiled engine loaded once, here: every worker inherits it
        self.pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("fork"),
                                        initializer=_worker_init)
        self.pool.submit(int).result()     # the first task forks every worker: now, before any other thread

    def _map_pool(self, fn, jobs, label, bar):
        from concurrent.futures import as_completed

        futures = {self.pool.submit(fn, job): i for i, job in enumerate(jobs)}
        out = [None] * len(jobs)
        try:
            for fut in as_completed(futures):
                i = futures[fut]
                exc = fut.exception()
                if exc is not None:
                    raise self._failed(label(jobs[i]), exc) from exc
                out[i] = fut.result()
                if bar is not None:
                    bar.update(1)
        except BaseException:
            for fut in futures:
                fut.cancel()
            self.close(cancel=True)
            raise
        return out

    def _map_dask(self, fn, jobs, label, bar):
        from distributed import as_completed

        futures = self.client.map(fn, jobs, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        out = [None] * len(jobs)
        try:
            for fut in as_completed(futures):
                i = index[fut.key]
                if fut.status != "finished":
                    try:
                        exc = fut.exception()
                    except Exception as e:          # cancelled, worker lost, ...
                        exc = e
                    raise self._failed(label(jobs[i]), exc) from exc
                out[i] = fut.result()
                if bar is not None:
                    bar.update(1)
        except BaseException:
            self.client.cancel(futures)
            raise
        return out


# ---- command-line options (fred scan, fred sweep) ------------------------------------------------

#: local worker processes at most (each is a Python process of ~100 MB running the simulator)
MAX_WORKERS = 64


def add_runner_arguments(p):
    from fred.commands.options import integer, name

    g = p.add_argument_group("parallel execution (forked local workers, or Dask distributed)")
    g.add_argument("--workers", type=integer("--workers", 0, MAX_WORKERS), metavar="N", default=None,
                   help=f"local worker processes, forked once the model is loaded, 0..{MAX_WORKERS} "
                        "(default: one per core); 0 runs the jobs serially in this process")
    g.add_argument("--scheduler", type=name("--scheduler"), metavar="ADDRESS", default=None,
                   help="run on an existing Dask cluster, e.g. tcp://host:8786 (its workers need the same fred)")
    g.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bar (none is shown anyway unless stdout and stderr are terminals)")


def runner_from_args(args) -> JobRunner:
    """The :class:`JobRunner` the options ask for; progress only on a terminal and without --quiet
    (:func:`fred.progress.enabled`)."""
    from fred import progress

    show = progress.enabled(getattr(args, "quiet", False))
    return JobRunner(workers=getattr(args, "workers", None), scheduler=getattr(args, "scheduler", None), progress=show)
