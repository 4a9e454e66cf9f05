"""Tests written for mutants of ``mrecord/storage/allocator.py`` (docs/RELIABILITY.md,
"Mutation testing"): which ``mallopt`` calls it makes, with glibc's own parameter numbers,
and every case where it leaves the allocator alone.

``tests/storage/test_allocator.py`` checks the effect (page faults) in fresh interpreters;
it cannot run under ``tools/mutation_quick.py``, whose mutated modules are large enough
that compiling them moves glibc's dynamic mmap threshold by itself. Here the C library is
faked, in this process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

import pytest

from mrecord.storage import allocator

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")


class FakeMallopt:
    """``mallopt``: records its calls, answers ``results`` in turn (1: success, 0: error)."""

    def __init__(self, results: list[int]) -> None:
        self.calls: list[tuple[int, int]] = []
        self.results = results
        self.argtypes: Any = None
        self.restype: Any = None

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.results[len(self.calls) - 1]


class FakeLibc:
    def __init__(self, mallopt: FakeMallopt | None) -> None:
        if mallopt is not None:
            self.mallopt = mallopt


def _glibc(
    monkeypatch: pytest.MonkeyPatch,
    results: tuple[int, int] = (1, 1),
    *,
    version: str | None = "glibc 2.36",
    library: str | None = "libc.so.6",
    has_mallopt: bool = True,
) -> tuple[FakeMallopt, list[str]]:
    """A process on ``version`` whose C library is a fake; returns its ``mallopt`` and the
    names ``ctypes.CDLL`` was asked to load."""
    for name in (*USER_SETTINGS, "MRECORD_KEEP_FREED_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(allocator, "_outcome", None)
    # a machine with memory to spare (under 1 GiB the allocator is left alone: small_budget)
    monkeypatch.setattr("mrecord.storage.probe.memory_budget", lambda: 64 << 30)

    def confstr(name: str) -> str | None:
        if name != "CS_GNU_LIBC_VERSION":  # as os.confstr does for a name it does not know
            raise ValueError("unrecognized configuration name")
        return version

    monkeypatch.setattr(os, "confstr", confstr)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: library if name == "c" else None)
    mallopt = FakeMallopt(list(results))
    loaded: list[str] = []

    def cdll(name: str) -> FakeLibc:
        loaded.append(name)
        return FakeLibc(mallopt if has_mallopt else None)

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    return mallopt, loaded


def test_on_glibc_it_raises_the_trim_and_mmap_thresholds_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """256 MiB of freed heap kept, values up to 32 MiB (glibc's largest mmap threshold)
    served from the heap; ``mallopt(int, int) -> int`` declared for ctypes; done once per
    process, whatever the number of readers."""
    mallopt, loaded = _glibc(monkeypatch)
    assert allocator.keep_freed_memory() is True
    assert mallopt.calls == [(M_TRIM_THRESHOLD, 256 << 20), (M_MMAP_THRESHOLD, 32 << 20)]
    assert allocator.KEEP_BYTES == 256 << 20
    assert mallopt.argtypes == [ctypes.c_int, ctypes.c_int]
    assert mallopt.restype is ctypes.c_int
    assert loaded == ["libc.so.6"]
    assert allocator.keep_freed_memory() is True
    assert len(mallopt.calls) == 2 and loaded == ["libc.so.6"]


def test_the_c_library_is_found_by_name_or_loaded_as_libc_so_6(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, loaded = _glibc(monkeypatch, library="libc-custom.so")
    assert allocator.keep_freed_memory() is True
    assert loaded == ["libc-custom.so"]
    _, loaded = _glibc(monkeypatch, library=None)
    assert allocator.keep_freed_memory() is True
    assert loaded == ["libc.so.6"]


@pytest.mark.parametrize("results", [(0, 1), (1, 0), (0, 0)])
def test_a_refused_setting_reports_false_and_both_are_still_tried(
    monkeypatch: pytest.MonkeyPatch, results: tuple[int, int]
) -> None:
    mallopt, _ = _glibc(monkeypatch, results)
    assert allocator.keep_freed_memory() is False
    assert [param for param, _ in mallopt.calls] == [M_TRIM_THRESHOLD, M_MMAP_THRESHOLD]
    assert allocator.keep_freed_memory() is False  # the outcome is kept, not retried
    assert len(mallopt.calls) == 2


@pytest.mark.parametrize("name", USER_SETTINGS)
def test_a_user_s_own_malloc_setting_stands(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    mallopt, loaded = _glibc(monkeypatch)
    monkeypatch.setenv(name, "131072")
    assert allocator.keep_freed_memory() is False
    assert mallopt.calls == [] and loaded == []


@pytest.mark.parametrize(("value", "applied"), [("0", False), ("1", True), ("yes", True)])
def test_mrecord_keep_freed_memory_0_turns_it_off(
    monkeypatch: pytest.MonkeyPatch, value: str, applied: bool
) -> None:
    mallopt, _ = _glibc(monkeypatch)
    monkeypatch.setenv("MRECORD_KEEP_FREED_MEMORY", value)
    assert allocator.keep_freed_memory() is applied
    assert len(mallopt.calls) == (2 if applied else 0)


@pytest.mark.parametrize("version", ["musl 1.2", "", None])
def test_other_c_libraries_are_left_alone(
    monkeypatch: pytest.MonkeyPatch, version: str | None
) -> None:
    mallopt, loaded = _glibc(monkeypatch, version=version)
    assert allocator.keep_freed_memory() is False
    assert mallopt.calls == [] and loaded == []


@pytest.mark.parametrize("error", [ValueError, OSError, AttributeError])
def test_a_platform_that_cannot_name_its_c_library_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    mallopt, _ = _glibc(monkeypatch)

    def confstr(name: str) -> str:
        raise error("unrecognized configuration name")

    monkeypatch.setattr(os, "confstr", confstr)
    assert allocator.keep_freed_memory() is False
    assert mallopt.calls == []


def test_a_platform_without_confstr_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    mallopt, _ = _glibc(monkeypatch)
    monkeypatch.delattr(os, "confstr")
    assert allocator.keep_freed_memory() is False
    assert mallopt.calls == []


def test_a_c_library_that_does_not_load_or_has_no_mallopt_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _glibc(monkeypatch, has_mallopt=False)
    assert allocator.keep_freed_memory() is False

    _glibc(monkeypatch)

    def broken(name: str) -> Any:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", broken)
    assert allocator.keep_freed_memory() is False
