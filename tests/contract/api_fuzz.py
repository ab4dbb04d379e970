"""Bad parameters of the Python API a library user calls (issue 12): the hardware blocks'
constructors and the model's estimate / collective functions, each parameter in turn given a
nasty value. Each call must either work or raise ``TypeError`` / ``ValueError`` /
:class:`fred.FredError` on one line naming the parameter (fred.contract.checks), within a time
limit; a result must be finite. Run as a script for the whole set; tests/contract/test_api_checks.py runs it.
"""

from __future__ import annotations

import math
import signal
import sys

#: values every parameter is tried with (the numpy ones arrive from user code as often as ints)
NASTY = [None, True, False, -1, 0, 1, 0.5, 1.5, float("nan"), float("inf"), -float("inf"), 1e300, 2**70,
         "4", "", "x", [], {}, (1,), b"4", 3 + 0j]
LIMIT_S = 20
#: words that name a parameter as well as its name does
SYNONYMS = (("dtype", "element type"), ("op", "unknown collective"), ("workload", "workload"),
            ("fabric", "fabric"))


def _numpy_values():
    import numpy as np

    return [np.int64(4), np.float64("nan"), np.array([1, 2])]


def targets():
    """(name, callable, good keyword arguments) of every entry point tried."""
    from fred.hdl.cells.microswitches import DCell, RCell, RDCell, build_cell
    from fred.hdl.crossbar import Crossbar
    from fred.hdl.fabric.recursive import Fabric
    from fred.hdl.switch.top import Switch
    from fred.model.collectives.api import collective_time
    from fred.model.training.estimator import estimate
    from fred.model.network.from_yaml import NetworkSpec

    return [
        ("RCell", RCell, dict(middle=3, lanes=2, dtype="int32")),
        ("DCell", DCell, dict(middle=3, lanes=2, dtype="int32")),
        ("RDCell", RDCell, dict(lanes=2, dtype="int32")),
        ("build_cell", build_cell, dict(kind="r", middle=2, lanes=1, dtype="int32")),
        ("Fabric", Fabric, dict(ports=4, middle=2, lanes=1, dtype="int32")),
        ("Crossbar", Crossbar, dict(ports=4, lanes=1, dtype="int32", variant="tree")),
        ("Switch", Switch, dict(ports=4, middle=2, lanes=2, dtype="int32", data_depth=8, ctrl_depth=2, max_len=4,
                                table_entries=4, config_settle=1, counter_bits=16)),
        ("estimate", estimate, dict(workload="resnet-152", fabric="mesh", microbatches=1, samples_per_replica=16,
                                    granularity=4, stream_steps=4, memory="auto", mode="weight-stationary",
                                    wafers=2, off_wafer="ndr")),
        ("collective_time", collective_time, dict(fabric="mesh", op="all-reduce", group=[0, 1, 2, 3], nbytes=2**20,
                                                  chunks=2, root=None, algorithm="ring")),
        ("NetworkSpec", NetworkSpec, dict(topology=["Ring"], npus_count=[4], bandwidth=[50.0], latency=[500.0],
                                          gb_bytes=1e9)),
    ]


class _Late(BaseException):
    pass


def _alarm(signum, frame):
    raise _Late()


def _finite(result) -> bool:
    d = result.as_dict() if hasattr(result, "as_dict") else getattr(result, "__dict__", {})
    return all(math.isfinite(v) for v in d.values() if isinstance(v, float))


def probe(name, fn, good, param, value) -> str:
    """"" when ``fn(**good, param=value)`` works or is refused well, else what is wrong."""
    kw = dict(good)
    kw[param] = value
    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, LIMIT_S)
    try:
        result = fn(**kw)
    except _Late:
        return f"{name}({param}={value!r}): still running after {LIMIT_S} s of CPU"
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        if "\n" in msg.strip() or not msg.strip():
            return f"{name}({param}={value!r}): {type(exc).__name__} not one line: {msg[:200]!r}"
        if param not in msg and param.replace("_", " ") not in msg and not any(
                param == p and w in msg for p, w in SYNONYMS):
            return f"{name}({param}={value!r}): {type(exc).__name__} does not name {param!r}: {msg[:200]!r}"
        return ""
    except Exception as exc:  # noqa: BLE001  (what is looked for)
        from fred import FredError

        if isinstance(exc, FredError) and param in str(exc):
            return ""
        return f"{name}({param}={value!r}): {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
    if not _finite(result):
        return f"{name}({param}={value!r}): a non-finite result"
    return ""


def run_all(values=None, only=None) -> tuple[int, list[str]]:
    values = NASTY + _numpy_values() if values is None else values
    n, bad = 0, []
    for name, fn, good in targets():
        if only and name not in only:
            continue
        for param in good:
            for v in values:
                n += 1
                p = probe(name, fn, good, param, v)
                if p:
                    bad.append(p)
    return n, bad


if __name__ == "__main__":
    n, bad = run_all(only=sys.argv[1:] or None)
    print("\n".join(bad))
    print(f"{n} calls, {len(bad)} problems")
