"""Direct reads batched through Linux's native AIO (``mrecord.storage.kernel_aio``).

What a reader relies on: the bytes that land in the buffer are the file's, at every
place of the batch, however many there are (more than one window of ``DEPTH``), from
several threads at once and in a forked child (a context belongs to its process); a read
that comes back short is reported, never taken as whole; and where the path cannot be
used (switched off, a file system that would do the reads one by one, a bad descriptor)
the answer is None, so the caller reads on its threads as before.
"""

from __future__ import annotations

import gc
import os
import platform
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord.storage import kernel_aio
from mrecord.storage.buffer_pool import aligned_buffer

PAGE = 4096
SPAN = 3 * PAGE

pytestmark = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "aarch64")),
    reason="native AIO is used on Linux x86-64 and AArch64 only (elsewhere the threads read)",
)


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(
        np.random.default_rng(7).integers(0, 256, 64 * SPAN + 1000, np.uint8).tobytes()
    )
    return path


@pytest.fixture
def direct_fd(data_file: Path) -> Iterator[int]:
    fd = os.open(data_file, os.O_RDONLY | os.O_DIRECT)
    try:
        yield fd
    finally:
        os.close(fd)


def _places(n: int, seed: int) -> list[tuple[int, int, int, int]]:
    """``n`` whole-page reads of SPAN bytes at random pages of the file's first 63 spans."""
    pages = np.random.default_rng(seed).integers(0, 63 * SPAN // PAGE, n)
    return [(i * SPAN, int(p) * PAGE, SPAN, SPAN) for i, p in enumerate(pages)]


def _expected(data: bytes, places: list[tuple[int, int, int, int]]) -> bytes:
    return b"".join(data[offset : offset + span] for _, offset, span, _ in places)


def test_a_batch_larger_than_the_window_reads_the_files_bytes(
    data_file: Path, direct_fd: int
) -> None:
    places = _places(kernel_aio.DEPTH * 3 + 5, seed=1)
    buffer = aligned_buffer(len(places) * SPAN)
    assert kernel_aio.read_batch(direct_fd, buffer, places) is True
    assert buffer.tobytes() == _expected(data_file.read_bytes(), places)


def test_a_read_that_ends_short_is_reported(data_file: Path, direct_fd: int) -> None:
    size = data_file.stat().st_size
    last_page = size // PAGE * PAGE
    # The file ends 1000 bytes into its last page: a read needing the whole page is short.
    places = [(0, 0, PAGE, PAGE), (PAGE, last_page, PAGE, PAGE)]
    assert kernel_aio.read_batch(direct_fd, aligned_buffer(2 * PAGE), places) is False
    # Needing only what is there, it is whole.
    places[1] = (PAGE, last_page, PAGE, size - last_page)
    buffer = aligned_buffer(2 * PAGE)
    assert kernel_aio.read_batch(direct_fd, buffer, places) is True
    assert buffer[PAGE : PAGE + size - last_page].tobytes() == data_file.read_bytes()[last_page:]


def test_threads_each_get_their_own_reads(data_file: Path, direct_fd: int) -> None:
    data = data_file.read_bytes()
    wrong: list[int] = []

    def work(seed: int) -> None:
        for round_ in range(10):
            places = _places(40, seed=seed * 100 + round_)
            buffer = aligned_buffer(len(places) * SPAN)
            ok = kernel_aio.read_batch(direct_fd, buffer, places)
            if ok is not True or buffer.tobytes() != _expected(data, places):
                wrong.append(seed)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_a_forked_child_reads_with_a_context_of_its_own(data_file: Path, direct_fd: int) -> None:
    places = _places(20, seed=3)
    assert kernel_aio.read_batch(direct_fd, aligned_buffer(20 * SPAN), places) is True
    expected = _expected(data_file.read_bytes(), places)
    pid = os.fork()
    if pid == 0:  # the child: the parent's context is not its own
        try:
            buffer = aligned_buffer(20 * SPAN)
            ok = kernel_aio.read_batch(direct_fd, buffer, places)
            os._exit(0 if ok is True and buffer.tobytes() == expected else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_finished_threads_context_is_given_back(direct_fd: int) -> None:
    """A long run starts new reading threads every epoch: their contexts must go with them
    (the system allows ``fs.aio-max-nr`` request slots in all, 65,536 by default)."""
    in_use = Path("/proc/sys/fs/aio-nr")
    before = int(in_use.read_text())

    def work() -> None:
        kernel_aio.read_batch(direct_fd, aligned_buffer(SPAN), [(0, 0, SPAN, SPAN)])

    for _ in range(40):
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    gc.collect()
    # 40 contexts kept would hold 40 * DEPTH slots (the kernel counts at least that).
    assert int(in_use.read_text()) - before < 4 * kernel_aio.DEPTH


def test_not_used_where_the_file_system_would_read_one_by_one(
    direct_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fuse = 0x65735546
    monkeypatch.setattr(kernel_aio, "_asynchronous", {})
    monkeypatch.setattr(kernel_aio, "_file_system_type", lambda fd: fuse)
    assert kernel_aio.read_batch(direct_fd, aligned_buffer(SPAN), [(0, 0, SPAN, SPAN)]) is None


def test_a_thread_refused_a_context_reads_on_the_threads(
    direct_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``io_setup`` refused for want of request slots (``EAGAIN``: ``fs.aio-max-nr`` used
    up by other contexts): that thread's batches answer None, another thread still sets
    up its own."""
    import ctypes
    import errno

    assert kernel_aio._KERNEL is not None
    syscall, numbers = kernel_aio._KERNEL

    def no_slots(number: Any, *args: Any) -> int:
        if number.value == numbers[0]:  # io_setup
            ctypes.set_errno(errno.EAGAIN)
            return -1
        return int(syscall(number, *args))

    answers: list[bool | None] = []

    def work() -> None:
        answers.append(kernel_aio.read_batch(direct_fd, aligned_buffer(SPAN), [(0, 0, SPAN, SPAN)]))

    with monkeypatch.context() as patch:
        patch.setattr(kernel_aio, "_KERNEL", (no_slots, numbers))
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert answers == [None]
    assert kernel_aio._refused is False  # not the whole process
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert answers == [None, True]


def test_not_used_when_switched_off(direct_fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_aio, "_KERNEL", None)  # MRECORD_NATIVE_AIO=0, or elsewhere
    assert kernel_aio.read_batch(direct_fd, aligned_buffer(SPAN), [(0, 0, SPAN, SPAN)]) is None


def test_a_batch_the_kernel_refuses_goes_to_the_threads(
    direct_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``io_submit`` refusing the first read (a file system without direct AIO): nothing
    is in flight, and the answer is None (``read_direct`` then reads on its threads)."""
    monkeypatch.setattr(kernel_aio, "_submit", lambda context, pointers: -1)
    places = _places(10, seed=5)
    assert kernel_aio.read_batch(direct_fd, aligned_buffer(10 * SPAN), places) is None


def test_a_wait_the_kernel_fails_waits_out_the_reads_and_falls_back(
    data_file: Path, direct_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``io_getevents`` failing with reads in flight: the context is destroyed (which waits
    for them) before the answer, None; the thread's next batch sets up a new one."""
    places = _places(30, seed=6)
    with monkeypatch.context() as patch:
        patch.setattr(kernel_aio, "_get_events", lambda context, least, most: None)
        assert kernel_aio.read_batch(direct_fd, aligned_buffer(30 * SPAN), places) is None
    buffer = aligned_buffer(30 * SPAN)
    assert kernel_aio.read_batch(direct_fd, buffer, places) is True
    assert buffer.tobytes() == _expected(data_file.read_bytes(), places)


def test_a_descriptor_it_cannot_read_falls_back(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)  # a directory: no reads at all
    try:
        answer = kernel_aio.read_batch(fd, aligned_buffer(SPAN), [(0, 0, SPAN, SPAN)])
    finally:
        os.close(fd)
    assert answer is not True


def test_the_environment_switch_is_read(tmp_path: Path) -> None:
    import subprocess

    code = "from mrecord.storage import kernel_aio; print(kernel_aio._KERNEL is None)"
    env = dict(os.environ, MRECORD_NATIVE_AIO="0")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"


def test_a_cold_random_read_beyond_memory_takes_the_batched_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader beyond its memory reading big values in a random order gets them through
    native AIO on this machine's file system (a silent fallback to the threads would
    only show as a slower reader), and gets the values written."""
    from mrecord import DatasetReader, FileWriter
    from mrecord.reader import dataset_reader
    from mrecord.storage import readahead
    from mrecord.storage.verified import clear_verified

    path = tmp_path / "big.mrecord"
    values = [bytes([i % 251]) * (60_000 + 97 * i) for i in range(48)]
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(1 << 20)
        writer.write_raw_data([{"id": i, "blob": v} for i, v in enumerate(values)])
    batches: list[bool | None] = []
    real = kernel_aio.read_batch

    def counted(fd: int, buffer: Any, places: Any) -> bool | None:
        answer = real(fd, buffer, places)
        batches.append(answer)
        return answer

    clear_verified()
    monkeypatch.setattr(readahead, "read_batch", counted)
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)
    monkeypatch.setattr(readahead, "looks_resident", lambda shard, ranges: False)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    order = np.random.default_rng(3).permutation(len(values))
    with DatasetReader.open(path, verify="once") as reader:
        for epoch in range(2):  # checked value by value, then as verified chunks
            for start in range(0, len(order), 8):
                ids = order[start : start + 8]
                got = reader.read_rows(ids, columns=["blob"]).columns["blob"]
                assert [bytes(v) for v in got] == [values[int(i)] for i in ids], epoch
    clear_verified()
    assert batches and all(answer is True for answer in batches)
