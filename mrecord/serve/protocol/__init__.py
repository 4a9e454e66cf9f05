"""What the server and its readers agree on, and nothing else: no web framework, no reader.

- :mod:`~mrecord.serve.protocol.errors`: the error codes (``busy`` included), their HTTP
  statuses and the mrecord error each becomes on the reader's side;
- :mod:`~mrecord.serve.protocol.limits`: :class:`Limits`, the bounds the server enforces
  (``GET /api/datasets/{name}`` tells readers the ones that shape their requests);
- :mod:`~mrecord.serve.protocol.wire`: the binary block format (HTTP body, and the
  same-host header with places in the reader's segment and in shared files);
- :mod:`~mrecord.serve.protocol.local`: the same-host transport's messages (Unix socket,
  descriptors passed with ``SCM_RIGHTS``);
- :mod:`~mrecord.serve.protocol.layout`: the block layout answers (page boundaries, memory
  budget, storage) from which a reader plans ``Shuffle.BLOCK`` as ``MindDataset`` does.

The server (:mod:`mrecord.serve.server`) and the client (:mod:`mrecord.serve.client`)
each import this package; neither imports the other.
"""

from __future__ import annotations
