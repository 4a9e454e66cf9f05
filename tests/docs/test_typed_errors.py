"""Every error mrecord raises is a ``MrecordError``: no bare builtin exception is raised.

``mrecord/errors.py`` promises that each error is a ``MrecordError`` that also inherits the
builtin a user would catch (``except ValueError`` keeps working). This test walks every module
of ``mrecord/`` with ``ast`` (like ``test_layering.py``) and fails, naming file:line, on any
``raise X(...)`` / ``raise X`` where ``X`` is a builtin exception class, and on any builtin
exception class instantiated outside a ``raise`` (``return TypeError(...)`` that a caller
raises later).

Not flagged: a re-raise (``raise``, ``raise exc``, ``raise exc from None``: the object was
made elsewhere) and the protocol-required raises of :data:`ALLOWED`.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mrecord"

BUILTIN_ERRORS = frozenset(
    name
    for name in dir(builtins)
    if isinstance(getattr(builtins, name), type)
    and issubclass(getattr(builtins, name), BaseException)
)

# Raises that a Python protocol requires, by (exception, the function it is raised in).
# Keep this short: anything a user sees as an error belongs in mrecord/errors.py.
ALLOWED: dict[str, str] = {
    # The iterator protocol ends a loop with exactly StopIteration.
    "StopIteration": "__next__",
    # Mapping-style lookups (`Schema["name"]`) promise KeyError; `in` and `.get` rely on it.
    "KeyError": "__getitem__",
    # Module and class `__getattr__` must raise AttributeError (hasattr, getattr defaults).
    "AttributeError": "__getattr__",
}
# Not an error: ends the process with an exit status (the CLI, `python -m mrecord.demo`).
EXIT = "SystemExit"
# An abstract method's whole body: `raise NotImplementedError` (after an optional docstring).
ABSTRACT = "NotImplementedError"
# The downstream test kit (mrecord.testing) reports a failed check as pytest's `assert` does.
TEST_KIT = PACKAGE / "testing"


def _is_abstract_stub(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return len(body) == 1 and isinstance(body[0], ast.Raise)


def bare_raises(source: str, *, test_kit: bool = False) -> list[tuple[int, str]]:
    """(line, description) of every builtin exception raised or made in ``source``."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    raised_calls: set[int] = set()

    def visit(node: ast.AST, func: ast.FunctionDef | ast.AsyncFunctionDef | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = node
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(node.exc, ast.Call):
                raised_calls.add(id(node.exc))
            if (
                isinstance(target, ast.Name)
                and target.id in BUILTIN_ERRORS
                and not _allowed(target.id, func, test_kit=test_kit)
            ):
                where = f" in {func.name}()" if func else ""
                found.append((node.lineno, f"raise {target.id}{where}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in BUILTIN_ERRORS
            and id(node) not in raised_calls
        ):
            found.append((node.lineno, f"{node.func.id}(...) made outside a raise"))
        for child in ast.iter_child_nodes(node):
            visit(child, func)

    visit(tree, None)
    return sorted(found)


def _allowed(
    name: str, func: ast.FunctionDef | ast.AsyncFunctionDef | None, *, test_kit: bool
) -> bool:
    if name == EXIT:
        return True
    if name == "AssertionError" and test_kit:
        return True
    if func is None:
        return False
    if name == ABSTRACT:
        return _is_abstract_stub(func)
    return ALLOWED.get(name) == func.name


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_no_bare_builtin_raise() -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in MODULES
        for line, what in bare_raises(path.read_text(), test_kit=TEST_KIT in path.parents)
    ]
    assert not bad, (
        f"{len(bad)} bare builtin exception(s) in mrecord/; raise a mrecord.errors class "
        "(it also inherits the builtin, so `except ValueError` keeps working):\n"
        + "\n".join(bad)
    )


def test_the_walker_sees_bare_raises_and_spares_protocols() -> None:
    """The checker itself: what it flags and what the allow-list lets through."""
    source = (
        "def f(x):\n"
        "    if x:\n"
        "        raise ValueError('bad x')\n"  # 3: flagged
        "    raise TypeError\n"  # 4: flagged (named, not called)
        "def g():\n"
        "    return RuntimeError('later')\n"  # 6: flagged (made outside a raise)
        "def h():\n"
        "    try:\n"
        "        pass\n"
        "    except OSError as exc:\n"
        "        raise\n"  # re-raise: fine
        "    except KeyError as exc:\n"
        "        raise exc from None\n"  # re-raise of a caught object: fine
        "class C:\n"
        "    def __next__(self):\n"
        "        raise StopIteration\n"  # protocol: fine
        "    def __getitem__(self, k):\n"
        "        raise KeyError(k)\n"  # protocol: fine
        "    def get(self, k):\n"
        "        raise KeyError(k)\n"  # 20: flagged (not __getitem__)
        "    def abstract(self):\n"
        "        '''Subclasses do it.'''\n"
        "        raise NotImplementedError\n"  # abstract stub: fine
        "    def partial(self, x):\n"
        "        if x:\n"
        "            raise NotImplementedError('not x')\n"  # 26: flagged (not a stub)
        "        return x\n"
        "def main():\n"
        "    raise SystemExit(2)\n"  # exit status: fine
        "def check():\n"
        "    raise AssertionError('differs')\n"  # 31: flagged outside the test kit
    )
    assert [line for line, _ in bare_raises(source)] == [3, 4, 6, 20, 26, 31]
    assert [line for line, _ in bare_raises(source, test_kit=True)] == [3, 4, 6, 20, 26]
