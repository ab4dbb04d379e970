"""``python -m fred.bench`` (``make bench``): run every benchmark module.

A benchmark is a module ``fred.hdl.bench_*``, ``fred.sim.bench_*`` or ``fred.model.bench_*``
with a ``main()`` that measures and prints its figures (ratios measured in the same run).
``python -m fred.bench NAME ...`` runs only the named ones (e.g. ``network``).
Benchmarks are not tests: they report, they do not pass or fail (a crash still exits non-zero).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time


def discover():
    found = []
    for pkg in ("fred.hdl", "fred.sim", "fred.model"):
        mod = importlib.import_module(pkg)
        for info in pkgutil.iter_modules(mod.__path__):
            if info.name.startswith("bench_"):
                found.append(f"{pkg}.{info.name}")
    return sorted(found, key=lambda n: n.rsplit(".", 1)[1])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    names = discover()
    if argv:
        wanted = {a.removeprefix("bench_") for a in argv}
        names = [n for n in names if n.rsplit(".bench_", 1)[1] in wanted]
        if not names:
            print(f"fred.bench: error: no benchmark named {', '.join(argv)}", file=sys.stderr)
            return 2
    for name in names:
        mod = importlib.import_module(name)
        if not hasattr(mod, "main"):
            continue
        print(f"=== {name} ===", flush=True)
        t0 = time.perf_counter()
        mod.main()
        print(f"--- {name}: {time.perf_counter() - t0:.1f} s wall\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
