"""``python -m fred.bench wafers``: several wafers and the other wafer fabrics (docs/training.md).

Prints three markdown tables and rewrites the block of ``docs/training.md`` between
``<!-- wafers:begin -->`` and ``<!-- wafers:end -->`` with them (when run from a checkout that
has the file), so the documented figures are this code's output:

* the four headline workloads at 1, 4, 16 and 64 wafers on the mesh and Fred-D (off-wafer
  network ``ndr``, the default; samples per replica fixed, so the global minibatch grows with W):
  iteration time, exposed inter-wafer time, Fred-D's speedup over the mesh; with the default NPU
  (k = 1) and with one k = 20 times faster (``fred scan``'s k: peak FLOP/s and HBM bandwidth),
  where the paper's speedups are about reproduced;
* the same workloads on one wafer of each other fabric (torus, switched, switched-inr) against
  Fred-D, at k = 1 and k = 20;
* the CPU time of one 64-wafer GPT-3 estimate against a one-wafer one.
"""

from __future__ import annotations

import pathlib
import time

from .docblock import rewrite_block

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "training.md"
BEGIN, END = "<!-- wafers:begin -->", "<!-- wafers:end -->"
WORKLOADS = ("resnet-152", "transformer-17b", "gpt3-175b", "transformer-1t")
WAFERS = (1, 4, 16, 64)
#: NPU speeds: the default and k = 20 (README "Fidelity": the paper's cells are reproduced at k ~ 15-30)
KS = (1.0, 20.0)
OTHERS = ("torus", "switched", "switched-inr")


def _npu(k):
    from fred.model.workload import compute as C
    from fred.model.training import scanner as S

    return S.scaled_npu(C.default_npu(), k)


def _ms(x):
    return f"{x * 1e3:.4g}"


def _table(head, rows):
    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def scaling_rows(workloads=WORKLOADS, wafers=WAFERS, ks=KS):
    """(k, workload, W, mesh ms, mesh inter ms, Fred-D ms, Fred-D inter ms, speedup)."""
    from fred.model.training import estimate

    rows = []
    for k in ks:
        npu = _npu(k)
        for w in workloads:
            for n in wafers:
                m = estimate(w, "mesh", npu=npu, wafers=n)
                d = estimate(w, "fred-d", npu=npu, wafers=n)
                rows.append((f"{k:g}", w, str(n), _ms(m.iteration_time), _ms(m.exposed.get("inter_wafer", 0.0)),
                             _ms(d.iteration_time), _ms(d.exposed.get("inter_wafer", 0.0)),
                             f"{m.iteration_time / d.iteration_time:.3f}"))
    return rows


def fabric_rows(workloads=WORKLOADS, ks=KS):
    """(k, workload, Fred-D speedup over mesh, torus, switched, switched-inr)."""
    from fred.model.training import estimate

    rows = []
    for k in ks:
        npu = _npu(k)
        for w in workloads:
            d = estimate(w, "fred-d", npu=npu).iteration_time
            m = estimate(w, "mesh", npu=npu).iteration_time
            cells = [f"{m / d:.3f}"] + [f"{estimate(w, f, npu=npu).iteration_time / d:.3f}" for f in OTHERS]
            rows.append((f"{k:g}", w, *cells))
    return rows


def cpu_rows():
    """(wafers, CPU seconds) of one GPT-3 estimate on Fred-D (this process, imports done)."""
    from fred.model.training import estimate

    estimate("gpt3-175b", "fred-d", wafers=2)         # warm the caches of the first call
    out = []
    for n in (1, 64):
        t0 = time.process_time()
        estimate("gpt3-175b", "fred-d", wafers=n)
        out.append((str(n), f"{time.process_time() - t0:.2f}"))
    return out


def report() -> str:
    out = ["Several wafers (`fred estimate --wafers W`, off-wafer network `ndr`): iteration time in ms, its "
           "exposed inter-wafer part, and Fred-D's speedup over the mesh; samples per replica fixed (16), so "
           "the global minibatch is W x DP x 16; k = NPU speed as in `fred scan`:", ""]
    out += _table(("k", "workload", "wafers", "mesh", "mesh inter-wafer", "Fred-D", "Fred-D inter-wafer",
                   "Fred-D speedup"), scaling_rows())
    out += ["", "One wafer of each fabric: Fred-D's speedup over the mesh, and each other fabric's iteration "
            "time over Fred-D's (above 1: Fred-D is faster):", ""]
    out += _table(("k", "workload", "mesh / Fred-D", "torus / Fred-D", "switched / Fred-D",
                   "switched-inr / Fred-D"), fabric_rows())
    out += ["", "CPU seconds of one GPT-3 estimate on Fred-D:", ""]
    out += _table(("wafers", "CPU s"), cpu_rows())
    return "\n".join(out)


def main(argv=None) -> int:
    text = report()
    print(text)
    rewrite_block(DOC, BEGIN, END, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
