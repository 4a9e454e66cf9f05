"""The layering in docs/ARCHITECTURE.md holds: every import of every module is allowed.

The table is parsed from the doc (one source of truth). Each module's imports are
found with ``ast`` over the whole file, so imports inside functions and under
``TYPE_CHECKING`` count too.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mrecord"
DOC = ROOT / "docs" / "ARCHITECTURE.md"
TOP = "mrecord"  # the top-level package itself: `from mrecord import FileWriter`


def allowed_table() -> dict[str, set[str]]:
    """``package -> packages it may import``, from the table between the layering markers."""
    text = DOC.read_text()
    pattern = r"<!-- layering-table: start -->(.*?)<!-- layering-table: end -->"
    match = re.search(pattern, text, re.S)
    assert match, f"{DOC} lost its layering table markers"
    table: dict[str, set[str]] = {}
    for line in match.group(1).strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = cells[0].strip("`")
        table[name] = set(re.findall(r"`([^`]+)`", cells[1])) if len(cells) > 1 else set()
    return table


def unit_of(module: str) -> str:
    """``mrecord.reader.shard`` -> ``reader``; ``mrecord.config`` -> ``config``; a module
    of a subpackage with its own row (``serve.server``) -> that row's name."""
    parts = module.split(".")
    if len(parts) == 1:
        return TOP
    for depth in range(len(parts) - 1, 1, -1):  # the longest dotted row first
        name = ".".join(parts[1 : depth + 1])
        if name in _dotted_rows():
            return name
    return parts[1]


@functools.cache
def _dotted_rows() -> frozenset[str]:
    """Rows of the table that name a subpackage (``serve.client``): its own layer."""
    return frozenset(name for name in allowed_table() if "." in name)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_units(path: Path) -> list[tuple[int, str, str]]:
    """(line, imported module, its unit) for every mrecord import in ``path``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return imports_in(path.read_text(), package)


def imports_in(source: str, package: str) -> list[tuple[int, str, str]]:
    """:func:`imported_units` for the source of a module inside ``package``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            if base == TOP:
                # `from mrecord import reader` names a package; `from mrecord import X` the top.
                for alias in node.names:
                    sub = PACKAGE / alias.name
                    is_unit = sub.is_dir() or sub.with_suffix(".py").is_file()
                    targets.append(f"{TOP}.{alias.name}" if is_unit else TOP)
            else:
                targets = [base]
        else:
            continue
        for target in targets:
            if target == TOP or target.startswith(TOP + "."):
                found.append((node.lineno, target, unit_of(target)))
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_package_has_a_row() -> None:
    table = allowed_table()
    units = {unit_of(module_name(p)) for p in MODULES}
    missing = sorted(units - set(table))
    assert not missing, (
        f"packages {missing} have no row in the layering table of {DOC.name}; add one saying "
        "which packages they may import"
    )


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layering_table(path: Path) -> None:
    table = allowed_table()
    own = unit_of(module_name(path))
    allowed = table.get(own, set()) | {own}
    bad = [
        f"line {line}: imports {target} ({unit!r} is not in {own!r}'s row)"
        for line, target, unit in imported_units(path)
        if unit not in allowed
    ]
    assert not bad, f"{path.relative_to(ROOT)} breaks docs/ARCHITECTURE.md's layering: {bad}"


def test_the_walker_sees_function_level_and_relative_imports() -> None:
    """The checker itself: imports hidden in a function, relative or aliased, are found."""
    source = (
        "import mrecord.train as t\n"
        "def f():\n"
        "    from mrecord.pipeline import dataset\n"
        "    from ..writer import x\n"
        "    from mrecord import sampling, FileWriter\n"
    )
    units = sorted(unit for _, _, unit in imports_in(source, "mrecord.reader"))
    assert units == ["mrecord", "pipeline", "sampling", "train", "writer"]


def test_a_subpackage_with_a_row_is_its_own_layer() -> None:
    """``serve.server`` and ``serve.client`` are layers of their own: the server may not
    import the pipeline, and neither side imports the other."""
    table = allowed_table()
    assert unit_of("mrecord.serve.server.app") == "serve.server"
    assert unit_of("mrecord.serve.buffers") == "serve"
    assert "pipeline" not in table["serve.server"]
    assert "serve.client" not in table["serve.server"]
    assert "serve.server" not in table["serve.client"]
    assert "serve.server" not in table["serve.protocol"]
    assert "serve.client" not in table["serve.protocol"]


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        (low, up)
        for low in ("format", "storage", "reader", "writer", "sampling", "pipeline")
        for up in ("torch", "ray", "serve", "cli")
    ]
    + [("reader", "writer"), ("writer", "reader"), ("reader", "pipeline"), ("format", "storage")],
)
def test_table_keeps_the_promised_directions(lower: str, upper: str) -> None:
    """The rules ARCHITECTURE.md states in words, so the table cannot be loosened by accident."""
    assert upper not in allowed_table().get(lower, set())


def test_the_table_has_no_cycles() -> None:
    """Packages never import each other in a loop: the allowed-imports graph is a DAG."""
    table = allowed_table()
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle allowed by the table: {' -> '.join((*path, name))}"
        if name in done:
            return
        for dep in table.get(name, set()):
            visit(dep, (*path, name))
        done.add(name)

    for name in table:
        visit(name, ())
