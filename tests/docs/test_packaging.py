"""Packaging: typed (PEP 561), SPDX license with its text, and a declared numpy minimum
that the Makefile's test-min-deps target actually tests."""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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


def _requirements() -> dict[str, list[str]]:
    extras: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "project"
    ]["optional-dependencies"]
    return extras


def test_extras_take_ranges_and_ci_pins_them_in_its_constraints_file() -> None:
    """An extra must not replace a user's torch 2.14 with 2.13: ranges in the extras, the
    exact versions CI tests in constraints/ci.txt, used by the Makefile's dev install."""
    from packaging.requirements import Requirement

    pins = {}
    for line in (ROOT / "constraints" / "ci.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            [spec] = list(req.specifier)
            assert spec.operator == "==", line
            pins[req.name] = spec.version
    assert pins["torch"] == "2.13.0"  # the CPU build on the machines' disk: never CUDA's GBs
    for extra, reqs in _requirements().items():
        for text in reqs:
            req = Requirement(text)
            assert all(s.operator != "==" for s in req.specifier), (extra, text)
            if req.name in pins:
                assert req.specifier.contains(pins[req.name]), (extra, text, pins[req.name])
    assert "torch" in pins and "ray" in pins and "torchdata" in pins
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints/ci.txt -e '.[dev]'" in makefile


def test_demo_installs_only_the_package() -> None:
    makefile = (ROOT / "Makefile").read_text()
    demo = re.search(r"^demo: *(.*)$", makefile, re.M)
    assert demo is not None
    stamp_var = demo.group(1).strip().removeprefix("$(").removesuffix(")")
    recipe = re.search(rf"^\$\({stamp_var}\):.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None, stamp_var
    assert "-e ." in recipe.group(1) and "[dev]" not in recipe.group(1)


def test_readme_says_how_to_install_from_a_checkout() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e '/path/to/mrecord[torch]'" in readme
    assert "mrecord[torch] @ file:///path/to/mrecord" in readme
