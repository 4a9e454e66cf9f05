"""The client side of ``mrecord serve``: :class:`~.dataset.RemoteDataset`, a random-access
pipeline source over a transport (:mod:`~.transports`: HTTP, the same-host socket, and
the policy between them), with what readers of a process share in a
:class:`~.session.Session`. It imports the protocol and the pipeline, never the server.
"""

from __future__ import annotations

from mrecord.serve.client.dataset import TRANSPORTS, RemoteDataset

__all__ = ["TRANSPORTS", "RemoteDataset"]
