"""`fred collective --network`: ASTRA-sim size conventions, --size-is, --fabric refused (issue 16)."""

import json

import pytest

from fred.cli import main

RING8 = "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100.0 ]\nlatency: [ 500.0 ]\n"


def run_cli(capsys, *argv):
    rc = main(["collective", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def ring8(tmp_path):
    f = tmp_path / "ring8.yml"
    f.write_text(RING8)
    return str(f)


def _row(capsys, *argv):
    rc, out, err = run_cli(capsys, *argv, "--json")
    assert rc == 0, err
    (d,) = json.loads(out)["results"]
    return d


@pytest.mark.parametrize("op", ["all-gather", "reduce-scatter"])
def test_size_is_scales_by_group(capsys, ring8, op):
    """--network: --size is each NPU's input (ASTRA-sim); all-gather's output and
    reduce-scatter's input per NPU are the group size (8) times the other side."""
    d_in = _row(capsys, "--network", ring8, "--op", op, "--size", "1MiB")
    d_out = _row(capsys, "--network", ring8, "--op", op, "--size", "1MiB", "--size-is", "output")
    assert d_in["size_is"] == "input" and d_out["size_is"] == "output"
    assert d_in["size_bytes"] == d_out["size_bytes"] == 2**20
    big, small = (d_in, d_out) if op == "all-gather" else (d_out, d_in)
    assert big["model_bytes_per_npu"] == 8 * small["model_bytes_per_npu"] == 8 * 2**20
    # each NPU sends 7/8 of the model's per-NPU bytes in a ring all-gather or reduce-scatter
    assert big["bytes_sent_per_npu"] == pytest.approx(7 / 8 * big["model_bytes_per_npu"])


def test_fabric_default_is_output_and_all_reduce_unchanged(capsys, ring8):
    d = _row(capsys, "--fabric", "fred-c", "--op", "all-gather", "--size", "1MiB")
    assert d["size_is"] == "output" and d["model_bytes_per_npu"] == 2**20
    a = _row(capsys, "--network", ring8, "--size", "1MiB")
    assert a["model_bytes_per_npu"] == 2**20
    # --size-is means nothing for All-Reduce (its input and output are the same size): refused
    rc, out, err = run_cli(capsys, "--network", ring8, "--size", "1MiB", "--size-is", "output")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--size-is 'output' does not apply to all-reduce" in err


@pytest.mark.parametrize("argv, match", [
    (["--fabric", "mesh"], r"--fabric 'mesh' does not apply with --network"),
    (["--size-is", "both"], r"--size-is: invalid choice: 'both'"),
])
def test_network_refusals_one_line(capsys, ring8, argv, match):
    import re

    rc, out, err = run_cli(capsys, "--network", ring8, *argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and re.search(match, err), err


def test_size_is_refuses_unequal_groups(capsys, ring8):
    rc, out, err = run_cli(capsys, "--network", ring8, "--op", "all-gather", "-g", "0-3", "-g", "4,5")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "groups of different sizes" in err
