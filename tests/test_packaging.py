"""Packaging: typed (PEP 561), SPDX license with its text, and a declared numpy minimum
that the Makefile's test-min-deps target actually tests."""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_package_ships_py_typed() -> None:
    assert resources.files("mrecord").joinpath("py.typed").is_file()


def test_pyproject_declares_spdx_license_typed_and_min_numpy() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert "Typing :: Typed" in project["classifiers"]
    assert "py.typed" in meta["tool"]["setuptools"]["package-data"]["mrecord"]
    numpy_req = next(d for d in project["dependencies"] if d.startswith("numpy"))
    minimum = re.fullmatch(r"numpy>=(\d+\.\d+)", numpy_req)
    assert minimum, numpy_req
    makefile = (ROOT / "Makefile").read_text()
    assert f"'numpy=={minimum.group(1)}.*'" in makefile
    assert "make test-min-deps" in (ROOT / ".ci" / "run").read_text()


def test_license_file_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
