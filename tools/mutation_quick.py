"""mutmut's mutants of a few files, run in one process against the plain test functions of some
test modules: the cheap first pass of docs/RELIABILITY.md, "Mutation testing".

``make mutation`` (mutmut) runs every mutant in a forked worker against every test of its
group that covers the mutated function: sound, but on a loaded machine hours per package. This
tool generates the same mutants (mutmut 3.8.1's own generator) and calls the test functions of
the modules given directly, mutant by mutant, stopping at the first failure (``--only``
narrows the mutants to names matching a pattern, to re-check some). A mutant it kills
is killed by the suite too (the modules are part of it), so what survives here is a superset of
what survives ``make mutation``: each survivor still needs a test or an explanation.

Tests run with fresh fixtures each (``tmp_path``, ``tmp_path_factory``, ``monkeypatch`` and the
unparametrized fixtures of their module and conftest files, autouse ones included; tests
needing others, such as parametrized fixtures or ``capsys``, are left out), parametrized ones
with their parameters; a mutant that spends more than ``--cpu-limit`` seconds of CPU, or
``--wall-limit`` seconds of wall-clock time, in one test counts as killed (a user would see a
hang; the wall-clock limit catches one that waits without using CPU, such as an ``open`` of a
FIFO without ``O_NONBLOCK``).

    python tools/mutation_quick.py --tests tests/format/test_mutants_format.py \\
        mrecord/format/layout.py
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import importlib.util
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from types import FrameType
from typing import Any


class _CpuLimit(BaseException):
    """SIGPROF: a mutant used its CPU budget (a BaseException, so tests cannot catch it)."""


def _on_sigprof(signum: int, frame: FrameType | None) -> None:
    raise _CpuLimit


class _WallLimit(BaseException):
    """SIGALRM: a mutant waited past its wall-clock budget (a blocking system call returns
    EINTR and Python raises this instead of retrying it)."""


def _on_sigalrm(signum: int, frame: FrameType | None) -> None:
    raise _WallLimit


def _copy_tree(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in files:
        if not name:
            continue
        src = Path(os.fsdecode(name))
        if src.is_file():
            (dest / src).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / src)


def _generate(root: Path, sources: list[str]) -> list[str]:
    """Write mutmut's mutated version of each source into ``root``; return the mutant names."""
    from mutmut.__main__ import write_all_mutants_to_file
    from mutmut.utils.format_utils import get_mutant_name

    names: list[str] = []
    for source in sources:
        path = Path(source)
        with open(root / path, "w") as out:
            mutated = write_all_mutants_to_file(out=out, source=path.read_text(), filename=path)
        names += [get_mutant_name(path, n) for n in mutated.mutant_names]
    return names


class _TempPaths:
    """A stand-in for pytest's ``tmp_path_factory``: ``mktemp(name)`` under one folder."""

    def __init__(self, base: Path) -> None:
        self._base = base
        self._count = 0

    def mktemp(self, basename: str, numbered: bool = True) -> Path:
        """A new folder named after ``basename``."""
        self._count += 1
        path = self._base / (f"{basename}{self._count}" if numbered else basename)
        path.mkdir()
        return path

    def getbasetemp(self) -> Path:
        """The folder the others are made in."""
        return self._base


class _Fixtures:
    """The fixtures a test may take: pytest's ``tmp_path``, ``tmp_path_factory`` and
    ``monkeypatch``, and the unparametrized fixtures of the test's module and of the
    ``conftest.py`` files above it. Each call gets fresh ones (function scope whatever
    their declared scope: a session-scoped dataset written by unmutated code would hide
    mutants of the writer)."""

    BUILTIN = frozenset({"tmp_path", "tmp_path_factory", "monkeypatch"})

    def __init__(self, modules: list[Any]) -> None:
        self._defs: dict[str, Callable[..., Any]] = {}
        self.autouse: set[str] = set()  # fixtures every test of the module gets
        for module in modules:  # later modules (nearer the test) win
            for value in vars(module).values():
                wrapped = getattr(value, "_get_wrapped_function", None)
                marker = getattr(value, "_fixture_function_marker", None)
                if wrapped is None or marker is None or marker.params is not None:
                    continue
                self._defs[marker.name or value.name] = wrapped()
                if marker.autouse:
                    self.autouse.add(marker.name or value.name)

    def provides(self, names: set[str], seen: frozenset[str] = frozenset()) -> bool:
        """Whether every fixture of ``names`` (and those they take) can be made here."""
        for name in names:
            if name in self.BUILTIN:
                continue
            func = self._defs.get(name)
            if func is None or name in seen:
                return False
            if not self.provides(set(inspect.signature(func).parameters), seen | {name}):
                return False
        return True

    def call(self, func: Callable[..., object], names: frozenset[str], /, **kwargs: Any) -> object:
        """Call ``func`` with fresh ``names`` fixtures; tear them down afterwards."""
        import pytest

        with tempfile.TemporaryDirectory(prefix="mrecord-mutant.") as tmp, ExitStack() as stack:
            base = Path(tmp)
            patch = pytest.MonkeyPatch()
            stack.callback(patch.undo)
            made: dict[str, Any] = {}
            temps = _TempPaths(base)

            def make(name: str) -> Any:
                if name not in made:
                    if name == "tmp_path":
                        made[name] = temps.mktemp("tmp")
                    elif name == "tmp_path_factory":
                        made[name] = temps
                    elif name == "monkeypatch":
                        made[name] = patch
                    else:
                        fixture = self._defs[name]
                        args = {a: make(a) for a in inspect.signature(fixture).parameters}
                        value = fixture(**args)
                        if inspect.isgenerator(value):
                            gen = value
                            value = next(gen)
                            stack.callback(_finish, gen)
                        made[name] = value
                return made[name]

            values = {name: make(name) for name in names}  # autouse ones too
            takes = inspect.signature(func).parameters
            return func(**{n: v for n, v in values.items() if n in takes}, **kwargs)


def _finish(gen: Iterator[Any]) -> None:
    """Run a generator fixture's teardown."""
    for _ in gen:
        pass


def _conftests(test_file: Path, root: Path) -> list[Any]:
    """The ``conftest.py`` modules from ``root``'s tests/ down to ``test_file``'s folder,
    imported as the package modules pytest makes of them (outermost first)."""
    modules: list[Any] = []
    rel = test_file.resolve().relative_to(root.resolve()).parent
    for depth in range(1, len(rel.parts) + 1):
        folder = Path(*rel.parts[:depth])
        if (root / folder / "conftest.py").is_file():
            modules.append(importlib.import_module(".".join((*folder.parts, "conftest"))))
    return modules


def _cases(module: Any, fixtures: _Fixtures) -> Iterator[tuple[str, Callable[[], object]]]:
    """Every test of ``module`` whose fixtures ``fixtures`` can make, as (id, call),
    parametrized ones expanded."""
    for name, func in vars(module).items():
        if not name.startswith("test_") or not callable(func):
            continue
        marks = [m for m in getattr(func, "pytestmark", []) if m.name == "parametrize"]
        params = set(inspect.signature(func).parameters)
        keys: list[str] = []
        if marks:
            argnames = marks[0].args[0]
            keys = [a.strip() for a in argnames.split(",")] if isinstance(argnames, str) else list(
                argnames
            )
        wanted = frozenset(params - set(keys)) | fixtures.autouse
        if len(marks) > 1 or not set(keys) <= params or not fixtures.provides(set(wanted)):
            continue  # stacked parametrize or fixtures made only by pytest: left to pytest
        call = functools.partial(fixtures.call, func, wanted)
        if not marks:
            yield name, call
            continue
        for i, value in enumerate(marks[0].args[1]):
            if type(value).__name__ == "ParameterSet":  # pytest.param(...)
                args = tuple(value.values)
            else:
                args = value if len(keys) > 1 else (value,)
            kwargs = dict(zip(keys, args, strict=True))
            yield f"{name}[{i}]", functools.partial(call, **kwargs)


def main() -> None:
    """Generate, run, print a JSON summary per module and the survivors' names."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tests", action="append", required=True, help="test module (repeatable)"
    )
    parser.add_argument("sources", nargs="+", help="files to mutate")
    parser.add_argument("--cpu-limit", type=float, default=20.0, help="CPU seconds per test")
    parser.add_argument(
        "--wall-limit", type=float, default=120.0, help="wall-clock seconds per test"
    )
    parser.add_argument(
        "--only", action="append", help="run only mutants whose name matches (fnmatch; repeatable)"
    )
    parser.add_argument("--keep", help="folder for the mutated tree (default: a temporary one)")
    parser.add_argument("--json", help="write every mutant's verdict here")
    args = parser.parse_args()

    root = Path(args.keep or tempfile.mkdtemp(prefix="mrecord-mutation-quick."))
    _copy_tree(root)
    names = _generate(root, args.sources)
    if args.only:
        names = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in args.only)]
    os.chdir(root)
    sys.path.insert(0, str(root))
    os.environ["MUTANT_UNDER_TEST"] = ""
    try:  # tests/conftest.py's "ci" profile: one fixed sequence of examples for every mutant
        from hypothesis import HealthCheck, settings

        settings.register_profile(
            "mutation",
            max_examples=25,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow],
        )
        settings.load_profile("mutation")
    except ImportError:
        pass
    cases: list[tuple[str, Callable[[], object]]] = []
    for i, test_file in enumerate(args.tests):
        spec = importlib.util.spec_from_file_location(f"mutation_quick_tests{i}", root / test_file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fixtures = _Fixtures([*_conftests(root / test_file, root), module])
        cases += [(f"{Path(test_file).stem}::{c}", call) for c, call in _cases(module, fixtures)]
    import mrecord

    assert Path(mrecord.__file__).is_relative_to(root), f"mrecord imported from {mrecord.__file__}"
    for _case_id, call in cases:  # the unmutated code passes every test
        call()

    signal.signal(signal.SIGPROF, _on_sigprof)
    signal.signal(signal.SIGALRM, _on_sigalrm)
    verdicts: dict[str, str] = {}
    start = time.process_time()
    for name in names:
        os.environ["MUTANT_UNDER_TEST"] = name
        verdict = "survived"
        for case_id, call in cases:
            signal.setitimer(signal.ITIMER_PROF, args.cpu_limit)
            signal.setitimer(signal.ITIMER_REAL, args.wall_limit)
            try:
                call()
            except _CpuLimit:
                verdict = f"killed: CPU limit in {case_id} (hang)"
            except _WallLimit:
                verdict = f"killed: wall-clock limit in {case_id} (hang)"
            except BaseException:  # any failure kills the mutant
                verdict = f"killed by {case_id}"
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
                signal.setitimer(signal.ITIMER_REAL, 0)
            if verdict != "survived":
                break
        verdicts[name] = verdict
    os.environ["MUTANT_UNDER_TEST"] = ""

    summary: dict[str, dict[str, int]] = {}
    for name, verdict in verdicts.items():
        mod = name.rsplit(".", 1)[0]
        row = summary.setdefault(mod, {"mutants": 0, "killed": 0, "survived": 0, "hang": 0})
        row["mutants"] += 1
        row["survived" if verdict == "survived" else "killed"] += 1
        row["hang"] += verdict.endswith("(hang)")
    print(json.dumps(summary, indent=1))
    print(f"{len(cases)} test cases, {time.process_time() - start:.1f} CPU s; tree in {root}")
    for name, verdict in verdicts.items():
        if verdict == "survived":
            print("survived:", name)
    if args.json:
        Path(args.json).write_text(json.dumps(verdicts, indent=1))


if __name__ == "__main__":
    main()
