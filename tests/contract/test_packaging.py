"""pyproject.toml installs every module and every data file of the source tree.

An editable install (``make venv``) finds every module whatever ``[tool.setuptools] packages``
says, so a package left out of the list (or a C++ harness left out of the package data) shows
only in a regular install -- a wheel -- as an ImportError or a missing file. This test reads the
list and the globs and compares them with the folders on disk.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _config():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def _folder(pkg: str, package_dir: dict) -> Path:
    """The folder of package ``pkg`` under the ``package-dir`` mapping (longest prefix wins)."""
    best = max((k for k in package_dir if pkg == k or pkg.startswith(k + ".")), key=len)
    rest = pkg[len(best):].lstrip(".")
    return ROOT / package_dir[best] / Path(*rest.split(".")) if rest else ROOT / package_dir[best]


def _source_folders(package_dir: dict) -> dict:
    """Every folder under the mapped roots that holds a file, as ``{package name: folder}``."""
    found = {}
    for name, folder in package_dir.items():
        base = ROOT / folder
        for d in [base, *sorted(p for p in base.rglob("*") if p.is_dir())]:
            if d.name == "__pycache__" or any(part.startswith(".") for part in d.relative_to(ROOT).parts):
                continue
            if any(f.is_file() for f in d.iterdir()):
                rel = d.relative_to(base)
                found[".".join([name, *rel.parts])] = d
    return found


def test_every_source_folder_is_a_listed_package():
    cfg = _config()
    listed = set(cfg["packages"])
    on_disk = _source_folders(cfg["package-dir"])
    missing = sorted(set(on_disk) - listed)
    assert not missing, f"folders with files but not in pyproject's packages: {missing}"
    stale = sorted(p for p in listed if not _folder(p, cfg["package-dir"]).is_dir())
    assert not stale, f"packages listed in pyproject.toml without a folder: {stale}"


def test_every_data_file_is_package_data():
    cfg = _config()
    data = cfg.get("package-data", {})
    for pkg in cfg["packages"]:
        folder = _folder(pkg, cfg["package-dir"])
        for f in sorted(folder.iterdir()):
            if not f.is_file() or f.suffix in (".py", ".pyc"):
                continue
            globs = data.get(pkg, [])
            assert any(fnmatch.fnmatch(f.name, g) for g in globs), (
                f"{f.relative_to(ROOT)} is not installed: add a glob for it to "
                f"[tool.setuptools.package-data] {pkg!r} (has {globs})")


def test_the_check_sees_a_missing_package(tmp_path, monkeypatch):
    """The comparison fails when a package is dropped from the list (it can fail)."""
    cfg = _config()
    cfg["packages"] = [p for p in cfg["packages"] if p != "fred.sim.compiled"]
    monkeypatch.setattr(__import__(__name__), "_config", lambda: cfg)
    try:
        test_every_source_folder_is_a_listed_package()
    except AssertionError as e:
        assert "fred.sim.compiled" in str(e)
    else:
        raise AssertionError("a dropped package went unnoticed")
