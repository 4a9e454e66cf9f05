"""Serve a dataset over HTTP and read it remotely (needs pip install 'mrecord[serve]').

Starts `mrecord serve` on a free loopback port, reads rank 1 of 2 through
RemoteDataset, and checks it against the local MindDataset with the same arguments.
Run: python examples/serve_remote.py [OUT_DIR]
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from mrecord import MindDataset, RemoteDataset, Shuffle, config

from write_dataset import write_dataset


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_up(url: str, server: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"mrecord serve exited with code {server.returncode}")
        try:
            with urllib.request.urlopen(url + "/api/datasets", timeout=2) as answer:
                print("served:", [d["name"] for d in json.load(answer)["datasets"]])
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"mrecord serve did not answer at {url} in {timeout} s")


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    first = write_dataset(out / "example.mrecord", rows=200)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "mrecord.cli", "serve", f"train={first}", "--port", str(port)]
    server = subprocess.Popen(command)
    try:
        wait_until_up(url, server)
        config.set_seed(3)
        args = {"columns_list": ["label", "caption"], "shuffle": Shuffle.GLOBAL,
                "num_shards": 2, "shard_id": 1}
        remote = RemoteDataset(url, "train", **args)
        local = MindDataset(str(first), **args)
        got = [r["caption"] for r in remote.create_dict_iterator(num_epochs=1, output_numpy=True)]
        want = [r["caption"] for r in local.create_dict_iterator(num_epochs=1, output_numpy=True)]
        print(f"remote rank 1 of 2: {len(got)} rows, same as local: {got == want}")
        print("browse it at", url, "(the page lists the dataset, rows and thumbnails)")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
