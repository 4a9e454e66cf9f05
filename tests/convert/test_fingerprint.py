"""The source fingerprint a resumed conversion is checked against: it changes with any
file's name, size or modification time anywhere under the folder, and nothing else."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from mrecord.convert.base import file_fingerprint
from tests.tracing import traced_peak


def _tree(root: Path) -> Path:
    for rel, size in [("a/1.jpg", 10), ("a/2.jpg", 20), ("b/deep/3.jpg", 30), ("top.txt", 5)]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    return root


def test_fingerprint_follows_names_sizes_and_times(tmp_path: Path) -> None:
    """Same tree elsewhere: same digest; each kind of change anywhere: another digest."""
    root = _tree(tmp_path / "one")
    first = file_fingerprint(root)
    assert file_fingerprint(_tree(tmp_path / "two")) == first  # relative names only
    seen = {first}
    (root / "b" / "deep" / "3.jpg").write_bytes(b"y" * 31)  # size (and time)
    seen.add(file_fingerprint(root))
    os.utime(root / "a" / "1.jpg", ns=(1, 1))  # time alone
    seen.add(file_fingerprint(root))
    (root / "a" / "2.jpg").rename(root / "a" / "2b.jpg")  # name alone
    seen.add(file_fingerprint(root))
    (root / "b" / "deep" / "new.jpg").write_bytes(b"")  # a file added deep down
    seen.add(file_fingerprint(root))
    shutil.rmtree(root / "b")  # a folder removed
    seen.add(file_fingerprint(root))
    assert len(seen) == 6


def test_fingerprint_of_many_files_is_stable(tmp_path: Path) -> None:
    """Enough files to split the stats among threads: the digest does not depend on
    the split (two calls agree, and one file's change is seen wherever it is)."""
    root = tmp_path / "many"
    for i in range(300):
        (root / f"c{i % 7}").mkdir(parents=True, exist_ok=True)
        (root / f"c{i % 7}" / f"{i:04d}.jpg").write_bytes(b"z" * (i % 13))
    digest = file_fingerprint(root)
    assert file_fingerprint(root) == digest
    (root / "c6" / "0293.jpg").write_bytes(b"changed")
    assert file_fingerprint(root) != digest


def test_fingerprint_of_one_file_and_an_empty_folder(tmp_path: Path) -> None:
    """A single file is fingerprinted by its own name, size and time; an empty folder works."""
    (tmp_path / "empty").mkdir()
    assert len(file_fingerprint(tmp_path / "empty")) == 64
    one = tmp_path / "data.bin"
    one.write_bytes(b"abc")
    digest = file_fingerprint(one)
    one.write_bytes(b"abcd")
    assert file_fingerprint(one) != digest


def test_an_image_folders_fingerprint_hashed_in_parts_is_the_whole_listings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ImageFolderSource.fingerprint`` hashes its listing a part at a time (joined whole,
    the names of 300K files doubled the listing's memory): the digest is still that of the
    whole listing's text, so a checkpoint written before resumes."""
    import hashlib

    from mrecord.convert import imagefolder
    from mrecord.convert.imagefolder import ImageFolderSource

    for c in range(2):
        (tmp_path / f"c{c}").mkdir()
        for i in range(5):
            (tmp_path / f"c{c}" / f"é{i}.jpg").write_bytes(b"\xff\xd8\xff\xd9")
    monkeypatch.setattr(imagefolder, "_FINGERPRINT_ITEMS", 3)
    source = ImageFolderSource(tmp_path)
    listing = "".join(f"c{c}/é{i}.jpg\0{c}\n" for c in range(2) for i in range(5)).encode()
    digest, options = source.fingerprint().split(":", 1)
    assert digest == hashlib.sha256(listing).hexdigest()
    assert options == "None:None:95:raise"  # resize, reencode, quality, on_error


def test_an_image_folders_fingerprint_holds_a_part_of_its_listing_at_a_time(
    tmp_path: Path,
) -> None:
    from mrecord.convert.imagefolder import ImageFolderSource

    (tmp_path / "c0").mkdir()
    (tmp_path / "c0" / "a.jpg").write_bytes(b"\xff\xd8\xff\xd9")
    source = ImageFolderSource(tmp_path)
    source.items = [(str(tmp_path / "c0" / f"img_{i:07d}.jpg"), 0) for i in range(200_000)]
    _, peak = traced_peak(source.fingerprint)
    # the listing's text joined whole: its lines (~90 bytes each) and the text, ~26 MB
    assert peak < 8 << 20, f"the fingerprint held {peak >> 20} MB"
