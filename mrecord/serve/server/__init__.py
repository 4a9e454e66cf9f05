"""The server side of ``mrecord serve``: the datasets it owns, the HTTP app, the same-host
socket, and running them.

:mod:`~mrecord.serve.server.registry` (the named datasets), :mod:`~.answers` (checking
a block request, classifying errors), :mod:`~.app` (the ASGI app, Starlette),
:mod:`~.http_protocol` (uvicorn's protocol with a header deadline), :mod:`~.local` (the
same-host socket), :mod:`~.run` (``serve()`` and ``ServerThread``), :mod:`~.security`,
:mod:`~.thumbs`, :mod:`~.values`. It reads datasets with ``reader/`` and never imports
``pipeline/`` or the client.
"""

from __future__ import annotations
