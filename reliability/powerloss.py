"""Power-loss crash states: record a writer's file-system operations, replay every allowed loss.

A SIGKILL (``reliability/crash.py``) leaves the page cache intact, so it cannot show
what a power cut does to writes that were never fsync'ed. This harness can:

1. :class:`Recorder` runs a workload in this process with ``os.fsync``,
   ``os.fdatasync``, ``os.replace``, ``os.rename``, ``os.unlink``, ``os.remove``,
   ``os.truncate``, ``os.ftruncate``, ``os.mkdir`` and ``os.rmdir`` wrapped (and
   ``sqlite3.connect``, to see SQLite's commits, which it fsyncs in C). Around each
   call it snapshots the dataset folder (name -> inode, bytes) and appends to an op log:

   - ``Write``: a file's content changed since the last snapshot (whatever wrote it:
     Python file objects, ``shutil.copyfile``'s ``sendfile``, SQLite's C code);
   - ``Names``: one atomic change of the folder's names (a rename, an unlink, a create);
   - ``Sync``: a file's data became durable (``fsync``/``fdatasync`` of a file);
   - ``DirSync``: the folder's names became durable (``fsync`` of the folder);
   - ``Mark``: a workload marker (``BEGIN c`` / ``DONE c`` around ``commit()``).

   Recording system calls, not mrecord's functions, keeps the harness valid whatever
   the commit or append algorithm (in-place appends, truncation, new segment files).

2. :func:`crash_states` cuts the log after each op and builds the states a POSIX file
   system may show after a power cut there: every fsync'ed byte kept; each file's
   un-synced blocks (4 KiB) dropped, kept, or mixed, its size old or new (a grown file
   may show zeros); name changes after the last folder fsync undone or kept, in order
   (prefixes, as a journalling file system does) or any subset (sampled). Identical
   states are checked once.

3. :func:`check_state` materialises a state in a fresh folder and runs the crash
   harness's checks (:func:`reliability.crash.check_dataset`): the dataset opens with
   exactly the rows of the last commit that returned, or of the one in flight, whole;
   ``verify_dataset`` passes; the next writer rolls a journal forward or removes the
   partial files, and the rows do not change.

Only the dataset's own folder is modelled (mrecord writes every file of a dataset
there); a folder created or removed inside it is recorded as a name change.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import sqlite3
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BLOCK",
    "CampaignResult",
    "CrashState",
    "DirSync",
    "Mark",
    "Names",
    "Op",
    "Recorder",
    "Sync",
    "Write",
    "allowed_rows",
    "check_state",
    "crash_states",
    "record_workload",
    "run_campaign",
]

BLOCK = 4096
_WRAPPED = (
    "fsync",
    "fdatasync",
    "replace",
    "rename",
    "unlink",
    "remove",
    "truncate",
    "ftruncate",
    "mkdir",
    "rmdir",
)


@dataclass(frozen=True)
class Write:
    """File ``fid`` now holds ``data`` (not yet durable)."""

    fid: int
    data: bytes


@dataclass(frozen=True)
class Names:
    """One atomic change of the folder's names: name -> file id, or None when removed."""

    changes: tuple[tuple[str, int | None], ...]
    call: str


@dataclass(frozen=True)
class Sync:
    """File ``fid``'s data as last written is durable. ``atomic``: the write before it
    and this sync are one step (a SQLite transaction, whose journal rolls back a torn
    file), so no cut falls between them."""

    fid: int
    atomic: bool = False


@dataclass(frozen=True)
class DirSync:
    """Every name change so far is durable."""


@dataclass(frozen=True)
class Mark:
    """A workload marker, e.g. ``BEGIN 2`` or ``DONE 2``."""

    label: str


Op = Write | Names | Sync | DirSync | Mark


class Recorder:
    """Record the file-system operations on ``directory`` while the context is open.

    Use :meth:`mark` to note workload events. The folder's content when recording
    starts is taken as durable (as after ``sync``).
    """

    def __init__(self, directory: Path):
        self.directory = directory
        self.ops: list[Op] = []
        self.initial: dict[str, bytes] = {}
        self._dir_ino = os.stat(directory).st_ino
        self._fids: dict[int, int] = {}  # inode -> file id, while some name holds it
        self._next_fid = 0
        self._names: dict[str, int] = {}
        self._content: dict[int, bytes] = {}
        self._real: dict[str, Callable[..., Any]] = {}
        self._lock = threading.RLock()
        self._real_connect: Callable[..., sqlite3.Connection] = sqlite3.connect

    # -- snapshots ----------------------------------------------------------------------

    def _fid(self, ino: int) -> int:
        if ino not in self._fids:
            self._fids[ino] = self._next_fid
            self._next_fid += 1
        return self._fids[ino]

    def _snapshot(self) -> tuple[dict[str, int], dict[int, bytes]]:
        names: dict[str, int] = {}
        content: dict[int, bytes] = {}
        for entry in os.scandir(self.directory):
            st = entry.stat(follow_symlinks=False)
            fid = self._fid(st.st_ino)
            names[entry.name] = fid
            if stat.S_ISREG(st.st_mode):
                with contextlib.suppress(FileNotFoundError), open(entry.path, "rb") as fh:
                    content[fid] = fh.read()
            else:
                content[fid] = b""
        return names, content

    def _observe(self, call: str) -> None:
        """Log what changed since the last snapshot: contents first, then names, atomically."""
        names, content = self._snapshot()
        for fid, data in content.items():
            if self._content.get(fid) != data:
                self.ops.append(Write(fid, data))
        changes = tuple(
            (name, names.get(name))
            for name in sorted(set(names) | set(self._names))
            if names.get(name) != self._names.get(name)
        )
        if changes:
            self.ops.append(Names(changes, call))
        # An inode no name holds is gone; a later file reusing its number is a new file.
        held = set(names.values())
        for ino, fid in list(self._fids.items()):
            if fid not in held:
                del self._fids[ino]
        self._names, self._content = names, content

    # -- wrapping -----------------------------------------------------------------------

    def _wrap(self, name: str) -> Callable[..., Any]:
        real = self._real[name]

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self._lock:  # the shard writer may fdatasync from its own thread
                return call(*args, **kwargs)

        def call(*args: Any, **kwargs: Any) -> Any:
            self._observe(name)  # writes and creates made before this call
            if name in ("fsync", "fdatasync"):
                fd = args[0] if isinstance(args[0], int) else args[0].fileno()
                st = os.fstat(fd)
                result = real(*args, **kwargs)
                if st.st_ino == self._dir_ino and stat.S_ISDIR(st.st_mode):
                    self.ops.append(DirSync())
                elif st.st_ino in self._fids:
                    self.ops.append(Sync(self._fids[st.st_ino]))
                return result
            result = real(*args, **kwargs)
            self._observe(name)
            return result

        return wrapped

    def _sqlite_committed(self, conn: sqlite3.Connection) -> None:
        """A SQLite transaction committed: with a journal and ``synchronous`` FULL or
        EXTRA, SQLite fsynced the file itself (in C, unseen by the wrappers), so the
        content is logged as durable. SQLite's atomicity inside a transaction (its
        rollback journal) is trusted, not modelled: the file is seen before and after."""
        with self._lock:
            self._observe("sqlite commit")
            sync = conn.execute("PRAGMA synchronous").fetchone()[0]
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if sync < 2 or mode in ("off", "memory"):
                return
            for _, name, path in conn.execute("PRAGMA database_list").fetchall():
                if name == "main" and path:
                    with contextlib.suppress(FileNotFoundError):
                        ino = os.stat(path).st_ino
                        if ino in self._fids:
                            self.ops.append(Sync(self._fids[ino], atomic=True))

    def _connect(self, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        recorder = self

        class Recorded(sqlite3.Connection):
            def commit(self) -> None:
                super().commit()
                recorder._sqlite_committed(self)

            def execute(self, sql: str, *params: Any) -> sqlite3.Cursor:
                cursor = super().execute(sql, *params)
                if sql.strip().upper().startswith(("COMMIT", "END")):
                    recorder._sqlite_committed(self)
                return cursor

        kwargs.setdefault("factory", Recorded)
        conn: sqlite3.Connection = self._real_connect(*args, **kwargs)
        return conn

    def mark(self, label: str) -> None:
        """Note a workload event in the log (after logging the changes made so far)."""
        with self._lock:
            self._observe("mark")
            self.ops.append(Mark(label))

    def __enter__(self) -> Recorder:
        self._names, self._content = self._snapshot()
        self.initial = {
            name: self._content[fid] for name, fid in self._names.items() if fid in self._content
        }
        for name in _WRAPPED:
            self._real[name] = getattr(os, name)
        for name in _WRAPPED:
            setattr(os, name, self._wrap(name))
        self._real_connect = sqlite3.connect
        sqlite3.connect = self._connect  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        for name, real in self._real.items():
            setattr(os, name, real)
        sqlite3.connect = self._real_connect  # type: ignore[assignment]
        self._observe("end")


# -- crash states ---------------------------------------------------------------------------


@dataclass
class CrashState:
    """The folder's files after a power cut at op ``cut``; ``how`` says which losses."""

    cut: int
    files: dict[str, bytes]
    how: str
    marks: list[str] = field(default_factory=list)
    ordered: bool = True
    """True when the name changes kept are a prefix of those pending (a journalling
    file system's order); False for any subset, which POSIX also allows."""

    def key(self) -> str:
        """A digest of the visible files (with the markers, what identifies a check)."""
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        return h.hexdigest()


@dataclass
class _Replay:
    """The durable and the volatile view of the log up to a cut."""

    durable_names: dict[str, int]
    pending_names: list[Names]
    durable: dict[int, bytes]
    latest: dict[int, bytes]
    marks: list[str]


def _replay(ops: list[Op], cut: int, initial: dict[str, bytes]) -> _Replay:
    names: dict[str, int] = {}
    durable: dict[int, bytes] = {}
    for fid, (name, data) in enumerate(sorted(initial.items())):
        names[name] = -1 - fid  # the recorder's ids start at 0; the initial files get their own
        durable[-1 - fid] = data
    state = _Replay(dict(names), [], durable, dict(durable), [])
    current = dict(names)
    for op in ops[:cut]:
        if isinstance(op, Write):
            state.latest[op.fid] = op.data
        elif isinstance(op, Sync):
            state.durable[op.fid] = state.latest.get(op.fid, b"")
        elif isinstance(op, Names):
            state.pending_names.append(op)
            current = _apply_names(current, [op])
        elif isinstance(op, DirSync):
            state.durable_names = dict(current)
            state.pending_names = []
        else:
            state.marks.append(op.label)
    return state


def _apply_names(base: dict[str, int], ops: list[Names]) -> dict[str, int]:
    out = dict(base)
    for op in ops:
        for name, fid in op.changes:
            if fid is None:
                out.pop(name, None)
            else:
                out[name] = fid
    return out


def _mix(old: bytes, new: bytes, keep: Callable[[int], bool], size: bytes) -> bytes:
    """Blocks of ``new`` where ``keep(block)``, else of ``old`` (zeros past its end);
    the length of ``size``."""
    n = len(size)
    out = bytearray(n)
    for b in range(0, n, BLOCK):
        src = new if keep(b // BLOCK) else old
        piece = src[b : b + BLOCK]
        out[b : b + len(piece)] = piece[: n - b]
    return bytes(out)


def _file_choices(old: bytes, new: bytes, rng: random.Random) -> dict[str, bytes]:
    """The un-synced outcomes of one file tried at every cut (plus one random mix)."""
    if old == new:
        return {"synced": new}
    nblocks = (max(len(old), len(new)) + BLOCK - 1) // BLOCK
    seed = rng.random()
    picked = {b for b in range(nblocks) if random.Random(seed * 1e6 + b).random() < 0.5}
    return {
        "lost": old,
        "kept": new,
        "new size, old blocks": _mix(old, new, lambda b: False, new),
        "first half of blocks": _mix(old, new, lambda b: b < nblocks // 2, new),
        "random blocks": _mix(old, new, lambda b: b in picked, new if seed < 0.5 else old),
    }


def crash_states(
    ops: list[Op], initial: dict[str, bytes], rng: random.Random, random_per_cut: int = 4
) -> Iterator[CrashState]:
    """Every op-log prefix x {name changes: each ordered prefix, each one undone, random
    subsets} x {un-synced data: all lost, all kept, each file alone lost, random mixes}."""
    for cut in range(len(ops) + 1):
        if cut < len(ops) and isinstance(ops[cut], Write):
            continue  # a cut between two writes equals the cut before the next sync or rename
        following = ops[cut] if cut < len(ops) else None
        if isinstance(following, Sync) and following.atomic:
            continue  # inside a SQLite transaction: its journal restores the old file
        r = _replay(ops, cut, initial)
        pending = r.pending_names
        name_sets: list[tuple[str, bool, dict[str, int]]] = [
            (
                f"names: first {j} of {len(pending)} pending",
                True,
                _apply_names(r.durable_names, pending[:j]),
            )
            for j in range(len(pending) + 1)
        ]
        for j in range(len(pending) - 1):  # undoing the last one is a prefix, above
            undone = pending[:j] + pending[j + 1 :]
            name_sets.append(
                (f"names: pending #{j} undone", False, _apply_names(r.durable_names, undone))
            )
        for _ in range(random_per_cut if len(pending) > 2 else 0):
            subset = [op for op in pending if rng.random() < 0.5]
            name_sets.append(("names: random subset", False, _apply_names(r.durable_names, subset)))
        for label, ordered, visible in name_sets:
            choices = {
                fid: _file_choices(r.durable.get(fid, b""), r.latest.get(fid, b""), rng)
                for fid in set(visible.values())
            }
            volatile = [fid for fid, c in choices.items() if len(c) > 1]
            plans: list[tuple[str, dict[int, str]]] = [
                ("data: all kept", {fid: "kept" for fid in volatile}),
                ("data: all lost", {fid: "lost" for fid in volatile}),
            ]
            for fid in volatile:
                lost = {f: "lost" if f == fid else "kept" for f in volatile}
                plans.append((f"data: only file {fid} lost", lost))
            for _ in range(random_per_cut if volatile else 0):
                plans.append(
                    ("data: random", {fid: rng.choice(sorted(choices[fid])) for fid in volatile})
                )
            for how, plan in plans:
                files = {n: choices[fid][plan.get(fid, "synced")] for n, fid in visible.items()}
                yield CrashState(cut, files, f"{label}; {how}", list(r.marks), ordered)


def allowed_rows(marks: list[str], totals: list[int]) -> set[int]:
    """Row counts a correct dataset may hold after these markers (see crash.check_dataset)."""
    done = [int(m.split()[1]) for m in marks if m.startswith("DONE")]
    began = [int(m.split()[1]) for m in marks if m.startswith("BEGIN")]
    last = max(done, default=0)
    allowed = {totals[last]}
    if began and max(began) > last:
        allowed.add(totals[max(began)])
    return allowed


def check_state(state: CrashState, shards: int, totals: list[int], workdir: Path) -> int | str:
    """Materialise ``state`` under ``workdir`` and check it; returns the rows found, or
    the defect as a string."""
    from reliability.crash import check_dataset

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        folder = Path(tmp)
        for name, data in state.files.items():
            (folder / name).write_bytes(data)
        try:
            return check_dataset(folder, shards, allowed_rows(state.marks, totals))
        except Exception as exc:  # every failure is a finding to report
            return f"{type(exc).__name__}: {exc}"


# -- the workload and the campaign -------------------------------------------------------------


def record_workload(directory: Path, shards: int, commits: list[list[int]]) -> Recorder:
    """Create a dataset and append to it (``commits``: rows per write call, per commit),
    recording every file-system operation on ``directory``."""
    from reliability.crash import write_commits

    with Recorder(directory) as rec:

        def mark(what: str, c: int) -> None:
            if what in ("BEGIN", "DONE"):
                rec.mark(f"{what} {c}")

        write_commits(directory, shards, commits, mark, page_size=1024)
    return rec


@dataclass
class CampaignResult:
    """What a campaign tried and found, per name-order model ("ordered" / "unordered")."""

    ops: dict[str, int] = field(default_factory=dict)
    generated: int = 0
    checked: dict[str, int] = field(default_factory=dict)
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)
    defects: dict[str, list[str]] = field(default_factory=dict)

    @property
    def total_checked(self) -> int:
        """Distinct crash states checked, both models."""
        return sum(self.checked.values())


def run_campaign(
    workdir: Path,
    shards: int,
    commits: list[list[int]],
    seed: int = 1,
    random_per_cut: int = 4,
    max_states: int | None = None,
    unordered: bool = True,
) -> CampaignResult:
    """Record the workload, then check every distinct crash state (up to ``max_states``).

    ``unordered=False`` tries only name changes kept in order (a journalling file
    system); True adds the out-of-order subsets POSIX allows.
    """
    out = CampaignResult()
    totals = [0]
    for calls in commits:
        totals.append(totals[-1] + sum(calls))
    live = workdir / "live"
    live.mkdir(parents=True)
    rec = record_workload(live, shards, commits)
    for op in rec.ops:
        kind = f"Names(seen at {op.call})" if isinstance(op, Names) else type(op).__name__
        out.ops[kind] = out.ops.get(kind, 0) + 1
    seen: set[str] = set()
    rng = random.Random(seed)
    for state in crash_states(rec.ops, rec.initial, rng, random_per_cut):
        out.generated += 1
        model = "ordered" if state.ordered else "unordered"
        # The same files may be right before a commit returned and wrong after it.
        key = state.key() + repr(sorted(allowed_rows(state.marks, totals)))
        if key in seen or (model == "unordered" and not unordered):
            continue
        seen.add(key)
        if max_states is not None and out.total_checked >= max_states:
            break
        out.checked[model] = out.checked.get(model, 0) + 1
        found = check_state(state, shards, totals, workdir)
        if isinstance(found, str):
            outcome = "DEFECT"
            out.defects.setdefault(model, []).append(
                f"cut {state.cut} ({state.how}; marks {state.marks}): {found}"
            )
        elif found == totals[len([m for m in state.marks if m.startswith("DONE")])]:
            outcome = "last finished commit"
        else:
            outcome = "the commit in flight"
        out.outcomes[(model, outcome)] = out.outcomes.get((model, outcome), 0) + 1
    return out
