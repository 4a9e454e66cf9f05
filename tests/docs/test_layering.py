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
    return {name: {dep for dep, _ in deps} for name, deps in _table_rows().items()}


def lazy_table() -> dict[str, set[str]]:
    """``package -> packages it may import only lazily`` (marked ``(lazily)`` in the table):
    inside a function or under ``TYPE_CHECKING``, never while the module is being imported.
    Such an edge may point back up (``Dataset.map`` builds a ``MapDataset``, which
    subclasses ``Dataset``): it runs once both modules are loaded, so it is no cycle."""
    return {name: {dep for dep, lazy in deps if lazy} for name, deps in _table_rows().items()}


def _table_rows() -> dict[str, list[tuple[str, bool]]]:
    text = DOC.read_text()
    pattern = r"<!-- layering-table: start -->(.*?)<!-- layering-table: end -->"
    match = re.search(pattern, text, re.S)
    assert match, f"{DOC} lost its layering table markers"
    table: dict[str, list[tuple[str, bool]]] = {}
    for line in match.group(1).strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = cells[0].strip("`")
        found = re.findall(r"`([^`]+)`(\s*\(lazily\))?", cells[1]) if len(cells) > 1 else []
        table[name] = [(dep, bool(lazy)) for dep, lazy in found]
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


def eager_lines(source: str) -> set[int]:
    """Lines of the imports that run while the module is imported: not inside a function,
    not under ``if TYPE_CHECKING:``."""
    eager: set[int] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit_one(other)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            eager.add(node.lineno)
        visit(node)

    visit(ast.parse(source))
    return eager


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
    lazy = lazy_table().get(own, set())
    eager = eager_lines(path.read_text())
    bad += [
        f"line {line}: imports {target} when the module is imported ({own!r}'s row allows "
        f"{unit!r} only lazily: inside a function or under TYPE_CHECKING)"
        for line, target, unit in imported_units(path)
        if unit in lazy and line in eager
    ]
    assert not bad, f"{path.relative_to(ROOT)} breaks docs/ARCHITECTURE.md's layering: {bad}"


def test_the_walker_tells_lazy_imports_from_eager_ones() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import mrecord.block\n"
        "if TYPE_CHECKING:\n"
        "    from mrecord.pipeline.ops.map import MapDataset\n"
        "try:\n"
        "    import mrecord.errors\n"
        "except ImportError:\n"
        "    pass\n"
        "def f():\n"
        "    from mrecord.pipeline.ops import batch\n"
    )
    assert eager_lines(source) == {1, 2, 6}


OPS = PACKAGE / "pipeline" / "ops"
# The one op built on another: ``padded_batch`` is a ``batch`` (MindSpore's PaddedBatch is a
# BatchDataset, and ``get_batch_size`` finds it as one).
OPS_ON_OPS = {("padded_batch", "batch")}


@pytest.mark.parametrize("path", sorted(OPS.glob("*.py")), ids=lambda p: p.stem)
def test_ops_do_not_import_each_other(path: Path) -> None:
    """What several ops share lives in the engine (``pipeline/engine/``), not in one op."""
    others = [
        f"line {line}: {target}"
        for line, target, _ in imported_units(path)
        if target.startswith("mrecord.pipeline.ops.")
        and (path.stem, target.rpartition(".")[2]) not in OPS_ON_OPS
    ]
    assert not others, f"{path.relative_to(ROOT)} imports other ops: {others}"


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


PIPELINE_ROOMS = (
    "pipeline",
    "pipeline.dataset",
    "pipeline.engine",
    "pipeline.ops",
    "pipeline.sources",
)


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        (low, up)
        for low in ("format", "storage", "reader", "writer", "sampling", *PIPELINE_ROOMS)
        for up in ("torch", "ray", "serve", "cli")
    ]
    + [("reader", "writer"), ("writer", "reader"), ("reader", "pipeline"), ("format", "storage")]
    + [(room, "pipeline") for room in PIPELINE_ROOMS[1:]]  # no room imports the package's face
    + [("pipeline.engine", "pipeline.ops"), ("pipeline.engine", "pipeline.sources")]
    + [("pipeline.sources", "pipeline.ops"), ("pipeline.ops", "pipeline.sources")],
)
def test_table_keeps_the_promised_directions(lower: str, upper: str) -> None:
    """The rules ARCHITECTURE.md states in words, so the table cannot be loosened by accident."""
    assert upper not in allowed_table().get(lower, set())


def test_the_table_has_no_cycles() -> None:
    """Packages never import each other in a loop: the allowed-imports graph is a DAG
    (lazy edges aside: they run after every module is loaded)."""
    table, lazy = allowed_table(), lazy_table()
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle allowed by the table: {' -> '.join((*path, name))}"
        if name in done:
            return
        for dep in table.get(name, set()) - lazy.get(name, set()):
            visit(dep, (*path, name))
        done.add(name)

    for name in table:
        visit(name, ())
