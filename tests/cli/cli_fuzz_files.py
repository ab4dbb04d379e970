"""File cases of the CLI fuzz harness (:mod:`cli_fuzz`): the real example input files of every
format the CLI reads, mutated (bytes, lines, tokens and fields), each fed to the command that
reads it.

Formats: ASTRA-sim analytical network YAML (``collective --network``), Chakra execution traces
(``collective --chakra``: a folder of ``.et`` protobuf streams), ASTRA-sim 1.x text traces
(``estimate --trace``), timing files (``--timing``), workload YAML (``estimate -w FILE``).
Every refusal must name the file (its path or its name).
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
import shutil

from cli_fuzz import Case
from cli_fuzz_cases import HERE, ROOT, SHARED, TORUS, make_files

#: numbers that mean trouble in a numeric field
NUMBERS = ["0", "-1", "-0", "1", "0.5", "1.5", "1e3", "1e400", "-1e400", "nan", ".nan", ".inf", "-.inf", "inf",
           "NaN", "1e-300", "5e-324", "9" * 25, str(2**63), str(2**63 - 1), str(2**64), str(2**53 + 1), "0x10",
           "1_0", "1e18", "4096", "4097", "65536", "1e9", "\uff18"]
#: words that mean trouble in a text field
WORDS = ["", "x", "NONE", "none", "\u00e9t\u00e9", "\U0001f4a5", "a b", "#", "-", ":", "[", "{", "\"", "'", "&a",
         "*a", "!!python/object:os.system", "~", "null", "true", "\t", "\x00", "\x7f", "\ufeff"]


def _numbers(text):
    return [m.span() for m in re.finditer(r"(?<![A-Za-z_])[-+]?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?", text)]


def _words(text):
    return [m.span() for m in re.finditer(r"[A-Za-z_][A-Za-z_0-9.]*", text)]


def mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    """(mutated text, what was done) by one random text mutation."""
    lines = text.splitlines(keepends=True) or [""]
    op = rng.choice(["truncate", "drop line", "dup line", "swap lines", "number", "number", "number", "word",
                     "word", "join lines", "blank", "bom", "crlf", "garbage", "repeat", "tabs", "cut line"])
    if op == "truncate":
        return text[:rng.randrange(len(text) + 1)], op
    if op == "drop line":
        i = rng.randrange(len(lines))
        return "".join(lines[:i] + lines[i + 1:]), f"{op} {i + 1}"
    if op == "dup line":
        i = rng.randrange(len(lines))
        return "".join(lines[:i + 1] + lines[i:]), f"{op} {i + 1}"
    if op == "swap lines" and len(lines) > 1:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
        return "".join(lines), f"{op} {i + 1},{j + 1}"
    if op == "number" and _numbers(text):
        a, b = rng.choice(_numbers(text))
        v = rng.choice(NUMBERS)
        return text[:a] + v + text[b:], f"number {text[a:b]!r} -> {v!r}"
    if op == "word" and _words(text):
        a, b = rng.choice(_words(text))
        v = rng.choice(WORDS)
        return text[:a] + v + text[b:], f"word {text[a:b]!r} -> {v!r}"
    if op == "join lines" and len(lines) > 1:
        i = rng.randrange(len(lines) - 1)
        return "".join(lines[:i] + [lines[i].rstrip("\r\n") + " " + lines[i + 1]] + lines[i + 2:]), op
    if op == "blank":
        return rng.choice(["", " ", "\n", "\n\n\n", "\t\n"]), op
    if op == "bom":
        return "\ufeff" + text, op
    if op == "crlf":
        return text.replace("\n", "\r\n"), op
    if op == "garbage":
        i = rng.randrange(len(text) + 1)
        junk = "".join(chr(rng.choice([0, 7, 9, 10, 13, 27, 0x7f, 0xa0, 0xe9, 0x2028, 0xfeff, 0x1f4a5,
                                       rng.randrange(32, 127)])) for _ in range(rng.randint(1, 8)))
        return text[:i] + junk + text[i:], f"{op} {junk!r} at {i}"
    if op == "repeat":
        return text * rng.choice([2, 3, 50]), op
    if op == "tabs":
        return text.replace(" ", "\t"), op
    i = rng.randrange(len(lines))
    ln = lines[i]
    return "".join(lines[:i] + [ln[:rng.randrange(len(ln) + 1)] + "\n"] + lines[i + 1:]), f"cut line {i + 1}"


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    op = rng.choice(["flip", "flip", "truncate", "insert", "delete", "zero", "ff", "append", "prefix", "dup"])
    n = len(data)
    i = rng.randrange(max(n, 1))
    if op == "flip" and n:
        b = bytearray(data)
        b[i] ^= 1 << rng.randrange(8)
        return bytes(b), f"flip bit of byte {i}"
    if op == "truncate":
        return data[:i], f"truncate at {i}"
    if op == "insert":
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        return data[:i] + junk + data[i:], f"insert {junk!r} at {i}"
    if op == "delete":
        k = rng.randint(1, 4)
        return data[:i] + data[i + k:], f"delete {k} at {i}"
    if op in ("zero", "ff"):
        k = rng.randint(1, 8)
        return data[:i] + bytes([0 if op == "zero" else 0xFF]) * k + data[i + k:], f"{op} x{k} at {i}"
    if op == "append":
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        return data + junk, f"append {junk!r}"
    if op == "prefix":
        return rng.choice([b"\x00", b"\xff" * 10, b"\x80" * 12, b"\x05abc"]) + data, op
    return data + data, op


# ---- Chakra messages ---------------------------------------------------------------------------
def _et_messages(data):
    from fred.model.inputs.chakra_et import _messages

    return [raw for _, raw in _messages(data, "x")]


def _et_pack(raws):
    out = bytearray()
    for raw in raws:
        n = len(raw)
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                break
        out += raw
    return bytes(out)


def mutate_et(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A field-level mutation of one Chakra .et file (a node's type, size, deps ...)."""
    from fred.model.inputs.chakra_schema import GlobalMetadata, Node

    raws = _et_messages(data)
    meta = GlobalMetadata()
    meta.ParseFromString(raws[0])
    nodes = []
    for raw in raws[1:]:
        n = Node()
        n.ParseFromString(raw)
        nodes.append(n)
    node = rng.choice(nodes)
    op = rng.choice(["comm_size", "comm_size", "comm_type", "type", "dep", "dep", "duration", "id", "version",
                     "many", "compute", "attr type", "drop attr", "no nodes", "name"])
    what = op
    if op in ("comm_size", "comm_type"):
        for at in node.attr:
            if at.name == op:
                v = rng.choice([0, 1, 2**31 - 1, 2**50, 2**50 + 1, 2**62, 2**63 - 1, 99, 3, 8, 9])
                if op == "comm_size" and rng.random() < 0.5:
                    at.uint64_val = rng.choice([2**64 - 1, 2**63, 2**53 + 1])
                    v = at.uint64_val
                else:
                    at.int64_val = v
                what = f"{op} = {v}"
    elif op == "type":
        node.type = rng.choice([0, 1, 2, 5, 6, 99, -1])
        what = f"type = {node.type}"
    elif op == "dep":
        d = rng.choice([node.id, node.id + 1, 2**64 - 1, 12345])
        (node.data_deps if rng.random() < 0.5 else node.ctrl_deps).append(d)
        what = f"dep on {d}"
    elif op == "duration":
        node.type = 4
        node.duration_micros = rng.choice([0, 1, 10**6, 2**32, 2**63, 2**64 - 1])
        what = f"compute of {node.duration_micros} us"
    elif op == "id":
        node.id = rng.choice([0, 2**64 - 1])
        what = f"id = {node.id}"
    elif op == "version":
        meta.version = rng.choice(["", "x", "\u00e9" * 1000, "0.0.4"])
        what = f"version = {meta.version[:10]!r}"
    elif op == "many":
        k = rng.choice([2, 50, 2000])
        base = nodes[-1]
        for i in range(k):
            n = Node()
            n.CopyFrom(base)
            n.id = base.id + 1 + i
            del n.data_deps[:]
            n.data_deps.append(n.id - 1)
            nodes.append(n)
        what = f"{k} more nodes"
    elif op == "compute":
        n = Node(id=node.id + 1000, name="c", type=4, duration_micros=rng.choice([1, 10**9]))
        nodes.insert(0, n)
        what = "a compute node first"
    elif op == "attr type":
        for at in node.attr:
            at.string_val = "x"
        what = "attributes as strings"
    elif op == "drop attr":
        del node.attr[:]
        what = "no attributes"
    elif op == "no nodes":
        nodes = []
        what = op
    else:
        node.name = rng.choice(["", "\u00e9" * 5000, "a\nb"])
        what = "name"
    return _et_pack([meta.SerializeToString()] + [n.SerializeToString() for n in nodes]), what


def _chakra_cases(folder, rng, per_file) -> list[Case]:
    src = os.path.join(HERE, "data", "chakra-et", "all_reduce_4npus_1MB")
    out = []
    for k in range(per_file * 2):
        d = os.path.join(folder, f"et{k}")
        shutil.copytree(src, d)
        files = sorted(glob.glob(os.path.join(d, "*.et")))
        victim = rng.choice(files)
        r = rng.random()
        if r < 0.15:  # folder-level changes
            op = rng.choice(["remove", "extra", "rename", "empty", "dir", "other trace", "all empty", "symlink"])
            if op == "remove":
                os.remove(victim)
            elif op == "extra":
                shutil.copy(victim, os.path.join(d, "all_reduce.9.et"))
            elif op == "rename":
                os.rename(victim, victim.replace("all_reduce", "all_gather"))
            elif op == "empty":
                open(victim, "wb").close()
            elif op == "dir":
                os.remove(victim)
                os.mkdir(victim)
            elif op == "other trace":
                shutil.copy(victim, os.path.join(d, "x.0.et"))
            elif op == "all empty":
                for f in files:
                    os.remove(f)
            else:
                os.remove(victim)
                os.symlink("/dev/zero", victim)
            what = op
        else:
            data = open(victim, "rb").read()
            if r < 0.55:
                data, what = mutate_bytes(data, rng)
            else:
                data, what = mutate_et(data, rng)
                if rng.random() < 0.7:  # the same change on every NPU: it reaches the simulation
                    for f in files:
                        with open(f, "wb") as fh:
                            fh.write(data)
            with open(victim, "wb") as fh:
                fh.write(data)
        argv = ["collective", "--network", "{d}/ring4.yml", "--chakra", d, "--json"]
        out.append(Case(argv, names=[[d, os.path.basename(victim), "Chakra", ".et"]], label=f"chakra: {what}"))
    return out


# ---- text formats ------------------------------------------------------------------------------
def _sources():
    """(format, path, command line with FILE) of every example file."""
    astra = sorted(glob.glob(os.path.join(SHARED, "workloads", "astra-sim", "*.txt")))
    small = [p for p in astra if os.path.getsize(p) < 2000] or astra
    out = [("network", os.path.join(HERE, "data", "chakra-et", "ring4.yml"),
            ["collective", "--network", "FILE", "--size", "1MiB", "--json"]),
           ("network", os.path.join(ROOT, "model", "data", "example_ring_switch.yml"),
            ["collective", "--network", "FILE", "--size", "64KiB", "--json"]),
           ("network", None, ["collective", "--network", "FILE", "--op", "all-to-all", "--size", "64KiB"]),
           ("timing", os.path.join(ROOT, "contract", "data", "timing-default.json"),
            ["collective", "--timing", "FILE", "--size", "1MiB", "--json"]),
           ("workload", os.path.join(ROOT, "model", "data", "resnet152.yml"),
            ["estimate", "-w", "FILE", "-f", "mesh", "--json"]),
           ("workload", os.path.join(ROOT, "model", "data", "transformer-17b.yml"),
            ["estimate", "-w", "FILE", "-f", "fred-d", "--json"])]
    for p in small:  # LIBRA's files have no header lines: the tool that ran them gave them
        headed = open(p, encoding="utf-8").read().split(None, 1)[0] in ("DATA", "MODEL") or "HYBRID" in open(p).read(60)
        hdr = [] if headed else ["--trace-header", "HYBRID_TRANSFORMER model_parallel_NPU_group: 4"]
        out.append(("trace", p, ["estimate", "--trace", "FILE", "-f", "mesh", "--json"] + hdr))
    return out


def _yaml_field_mutation(text, rng):
    """Set one top-level key of a YAML mapping to a nasty value (keeps the rest)."""
    import yaml

    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        return text, "not a mapping"
    key = rng.choice(list(doc) + ["extra_key"])
    val = rng.choice([None, True, -1, 0, 0.5, 1e400, float("nan"), 2**70, 10**9, "x", [], {}, [1, 2], [0],
                      ["Ring"] * 3, [10**6], [2**63], "1e3", "\u00e9", {"a": 1}, [None], [-1.5], [True, False]])
    if isinstance(doc.get(key), list) and not isinstance(val, list) and rng.random() < 0.6:
        lst = list(doc[key])
        lst[rng.randrange(len(lst))] = val
        val = lst
    doc[key] = val
    return yaml.safe_dump(doc, allow_unicode=True), f"{key} = {str(val)[:40]}"


def _json_field_mutation(text, rng):
    doc = json.loads(text)
    paths = []
    todo = [((), doc)]
    while todo:
        p, v = todo.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                paths.append(p + (k,))
                todo.append((p + (k,), x))
    path = rng.choice(paths)
    node = doc
    for k in path[:-1]:
        node = node[k]
    val = rng.choice([None, True, -1, 0, 0.5, 1e300, float("nan"), float("inf"), 2**70, "x", [], {}, "<del>"])
    if val == "<del>":
        node.pop(path[-1])
    else:
        node[path[-1]] = val
    return json.dumps(doc), f"{'.'.join(map(str, path))} = {val!r}"


def file_cases(folder, per_file=40, seed=1) -> list[Case]:
    """``per_file`` mutations of every example file (twice that for the Chakra folder)."""
    make_files(folder)
    rng = random.Random(seed)
    cases = []
    for fmt, src, cmd in _sources():
        text = TORUS if src is None else open(src, encoding="utf-8").read()
        stem = os.path.splitext(os.path.basename(src or "torus.yml"))
        for k in range(per_file):
            r = rng.random()
            if r < 0.35 and fmt in ("network", "workload"):
                new, what = _yaml_field_mutation(text, rng)
            elif r < 0.35 and fmt == "timing":
                new, what = _json_field_mutation(text, rng)
            else:
                new, what = text, ""
                for _ in range(rng.choice([1, 1, 1, 2, 3])):
                    new, w = mutate_text(new, rng)
                    what += ("; " if what else "") + w
            path = os.path.join(folder, f"{stem[0]}.m{k}{stem[1]}")
            raw = new.encode("utf-8", "surrogatepass")
            if rng.random() < 0.1:
                raw, w = mutate_bytes(raw, rng)
                what += f"; {w}"
            with open(path, "wb") as fh:
                fh.write(raw)
            argv = [path if w == "FILE" else w for w in cmd]
            cases.append(Case(argv, names=[[path, os.path.basename(path)]], label=f"{fmt}: {what}"))
    cases += _chakra_cases(folder, rng, per_file)
    return cases
