"""3D-parallel strategies MP(a)-DP(b)-PP(c) and the placement rule (FRED-SPEC §3, §6).

Placement rule: ``NPU = mp + a * (pp + c * dp)`` with ``mp in [0, a)``, ``pp in [0, c)``,
``dp in [0, b)``: an MP group sits on consecutive NPU ports, then PP, then DP.

Expert parallelism (mixture-of-experts workloads): ``MP(a)-EP(e)-DP(b)-PP(c)`` has ``e x b``
data-parallel replicas; :func:`parse_strategy` returns ``(a, e * b, c)`` (every non-expert
weight is replicated over all ``e x b`` replicas and its gradients All-Reduced over them) and
:func:`expert_parallel` returns ``e``. Replica ``r = ep + e * dp`` (``ep in [0, e)``): the ``e``
replicas of an EP group are consecutive, so an EP group is ``e`` NPUs ``a x c`` apart (on FRED,
EP(4) with MP(1)-PP(1) is one L1 switch). Each EP group splits every MoE layer's experts over its
``e`` members and exchanges tokens by all-to-all among them (:func:`ep_groups`); an expert's
gradients are All-Reduced over the ``b`` replicas holding it (same ``ep``; :func:`expert_dp_groups`).

>>> parse_strategy("MP(2)-DP(5)-PP(2)")
(2, 5, 2)
>>> groups("MP(2)-DP(5)-PP(2)", "dp")[0]
[0, 4, 8, 12, 16]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DIMS = ("mp", "dp", "pp")
_TOKEN = re.compile(r"^\s*(MP|DP|PP|EP)\s*\(\s*([0-9]{1,12})\s*\)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Strategy:
    mp: int
    dp: int
    pp: int

    @property
    def npus(self) -> int:
        return self.mp * self.dp * self.pp

    def __str__(self) -> str:
        return f"MP({self.mp})-DP({self.dp})-PP({self.pp})"

    def npu(self, mp: int, dp: int, pp: int) -> int:
        return place(mp, dp, pp, (self.mp, self.dp, self.pp))

    def groups(self, dim: str) -> list[list[int]]:
        return groups((self.mp, self.dp, self.pp), dim)


def parse_strategy(text, npus: int | None = None) -> tuple[int, int, int]:
    """Parse "MP(a)-DP(b)-PP(c)" (any order, missing dimensions = 1) into ``(a, b, c)``.

    Also accepts a tuple/list ``(a, b, c)`` or a :class:`Strategy`. If ``npus`` is given the
    product must equal it. Raises ValueError naming the bad text. ``EP(e)`` (expert
    parallelism) counts into the data-parallel replicas: ``MP(a)-EP(e)-DP(b)-PP(c)`` gives
    ``(a, e * b, c)`` (:func:`expert_parallel` gives ``e``).
    """
    if type(text) is tuple and len(text) == 3 and npus is None and all(type(v) is int and v > 0 for v in text):
        return text                 # the common case (every placement of a schedule): already checked
    if isinstance(text, Strategy):
        abc = (text.mp, text.dp, text.pp)
    elif isinstance(text, (tuple, list)):
        if len(text) != 3 or not all(isinstance(v, int) and v > 0 for v in text):
            raise ValueError(f"strategy {tuple(text)!r} must be three positive integers (mp, dp, pp)")
        abc = tuple(text)
    else:
        s = str(text).strip()
        if not s:
            raise ValueError("empty strategy; expected e.g. 'MP(2)-DP(5)-PP(2)'")
        seen: dict[str, int] = {}
        for tok in re.split(r"[-_x*,\s]+(?![^()]*\))", s):
            if not tok:
                continue
            m = _TOKEN.match(tok)
            if not m:
                raise ValueError(f"bad strategy {text!r}: cannot parse {tok!r}; expected e.g. 'MP(2)-DP(5)-PP(2)'")
            dim, n = m.group(1).lower(), int(m.group(2))
            if dim in seen:
                raise ValueError(f"bad strategy {text!r}: {dim.upper()} given twice")
            if n < 1:
                raise ValueError(f"bad strategy {text!r}: {dim.upper()}({n}) must be >= 1")
            seen[dim] = n
        abc = (seen.get("mp", 1), seen.get("ep", 1) * seen.get("dp", 1), seen.get("pp", 1))
    if npus is not None and abc[0] * abc[1] * abc[2] != npus:
        ep = seen.get("ep", 1) if isinstance(text, str) else 1
        raise ValueError(f"strategy {format_strategy(abc, ep)} uses {abc[0] * abc[1] * abc[2]} NPUs, not {npus}")
    return abc


def format_strategy(abc, ep: int = 1) -> str:
    """``MP(a)-DP(b)-PP(c)``; with ``ep`` > 1 ``MP(a)-EP(ep)-DP(b / ep)-PP(c)``."""
    a, b, c = parse_strategy(abc)
    if ep > 1:
        return f"MP({a})-EP({ep})-DP({b // ep})-PP({c})"
    return f"MP({a})-DP({b})-PP({c})"


def expert_parallel(text) -> int:
    """The EP size of strategy ``text`` (1 without ``EP(e)``; a tuple or Strategy: 1)."""
    if not isinstance(text, str):
        return 1
    parse_strategy(text)
    for tok in re.split(r"[-_x*,\s]+(?![^()]*\))", text.strip()):
        m = _TOKEN.match(tok) if tok else None
        if m and m.group(1).lower() == "ep":
            return int(m.group(2))
    return 1


def ep_groups(abc, ep: int, stage: int) -> list[list[int]]:
    """The EP groups of pipeline stage ``stage`` (all-to-all groups): per MP index and DP
    index, the ``ep`` consecutive replicas ``ep_i + ep * dp``."""
    a, b, c = parse_strategy(abc)
    return [[place(x, e + ep * d, stage, (a, b, c)) for e in range(ep)] for d in range(b // ep) for x in range(a)]


def expert_dp_groups(abc, ep: int, stage: int) -> list[list[int]]:
    """The groups that hold the same experts in pipeline stage ``stage`` (their gradients'
    All-Reduce): per MP index and EP rank, the ``b / ep`` replicas ``ep_i + ep * dp``."""
    a, b, c = parse_strategy(abc)
    return [[place(x, e + ep * d, stage, (a, b, c)) for d in range(b // ep)] for e in range(ep) for x in range(a)]


def place(mp: int, dp: int, pp: int, abc) -> int:
    """The placement rule: NPU id of worker (mp, dp, pp) under strategy ``abc`` = (a, b, c)."""
    a, b, c = parse_strategy(abc)
    if not (0 <= mp < a and 0 <= dp < b and 0 <= pp < c):
        raise ValueError(f"worker (mp={mp}, dp={dp}, pp={pp}) outside strategy {format_strategy(abc)}")
    return mp + a * (pp + c * dp)


def coords(npu: int, abc) -> tuple[int, int, int]:
    """Inverse of :func:`place`: (mp, dp, pp) of NPU ``npu``."""
    a, b, c = parse_strategy(abc)
    if not 0 <= npu < a * b * c:
        raise ValueError(f"NPU {npu} outside strategy {format_strategy(abc)}")
    mp = npu % a
    pp = (npu // a) % c
    dp = npu // (a * c)
    return mp, dp, pp


def groups(abc, dim: str) -> list[list[int]]:
    """All groups of one dimension ("mp", "dp" or "pp"), each ordered along that dimension.

    MP groups: consecutive NPUs; PP groups: stage order; DP groups: replica order.
    """
    a, b, c = parse_strategy(abc)
    d = str(dim).strip().lower()
    if d not in DIMS:
        raise ValueError(f"unknown parallel dimension {dim!r}; known: {', '.join(DIMS)}")
    out = []
    if d == "mp":
        for dp in range(b):
            for pp in range(c):
                out.append([place(m, dp, pp, (a, b, c)) for m in range(a)])
    elif d == "pp":
        for dp in range(b):
            for mp in range(a):
                out.append([place(mp, dp, p, (a, b, c)) for p in range(c)])
    else:
        for pp in range(c):
            for mp in range(a):
                out.append([place(mp, x, pp, (a, b, c)) for x in range(b)])
    return out


def all_strategies(npus: int = 20) -> list[tuple[int, int, int]]:
    """Every (a, b, c) with a*b*c = npus, ordered by MP then DP."""
    out = []
    for a in range(1, npus + 1):
        if npus % a:
            continue
        for b in range(1, npus // a + 1):
            if (npus // a) % b:
                continue
            out.append((a, b, npus // (a * b)))
    return out


def parse_group(text, npus: int) -> list[int]:
    """"0-19", "0,4,8", "0-3,8-11" or "all" -> NPU ids; ValueError naming a bad or out-of-range id."""
    s = str(text).strip().lower()
    if s in ("all", "*", ""):
        return list(range(npus))
    out = []
    for part in s.split(","):
        part = part.strip()
        m = re.fullmatch(r"([0-9]{1,30})\s*-\s*([0-9]{1,30})", part)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if b < a:
                raise ValueError(f"bad NPU range {part!r} in group {text!r}")
            ids = range(a, b + 1)
        elif re.fullmatch(r"[0-9]{1,30}", part):
            ids = [int(part)]
        else:
            raise ValueError(f"bad group {text!r}: cannot parse {part!r}; expected e.g. 0-19 or 0,4,8")
        for i in ids:
            if i >= npus:
                raise ValueError(f"NPU {i} in group {text!r} outside the topology (NPUs 0..{npus - 1})")
            out.append(i)
    if len(set(out)) != len(out):
        raise ValueError(f"group {text!r} names an NPU twice")
    return out
