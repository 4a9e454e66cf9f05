"""``mrecord serve``: serve datasets over HTTP (a web page and an API; docs/SERVE.md)."""

from __future__ import annotations

import click

__all__ = ["serve"]


@click.command()
@click.argument("datasets", nargs=-1, required=True, metavar="DATASET...")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8750, show_default=True)
@click.option(
    "--token",
    envvar="MRECORD_SERVE_TOKEN",
    default=None,
    help="Require 'Authorization: Bearer TOKEN' (needed to listen beyond loopback). "
    "Also read from MRECORD_SERVE_TOKEN, which keeps it out of `ps`.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Requests reading data at once (threads); the others wait their turn.",
)
@click.option(
    "--client-workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Of --workers, how many one client (address) may hold at once; its other "
    "requests wait in its own queue, so one client cannot starve the others. "
    "[default: half of --workers, at least 1]",
)
@click.option(
    "--client-max-requests",
    type=click.IntRange(1, 65536),
    default=64,
    show_default=True,
    help="Requests one client may have waiting or being answered; more get 503 busy "
    "(retried by RemoteDataset).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1, 4096),
    default=64,
    show_default=True,
    help="Open connections at once (more get 503 and are retried by RemoteDataset); each "
    "RemoteDataset keeps up to its num_parallel_workers + 2 open.",
)
@click.option(
    "--local-socket",
    default="auto",
    show_default=True,
    metavar="auto|off|PATH",
    help="Unix socket for RemoteDatasets on this machine: blocks arrive in their shared "
    "memory instead of through TCP (Linux; only this user can connect). 'auto' picks a "
    "private path and GET /api/datasets/NAME tells loopback clients where it is.",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="PEM certificate: serve HTTPS (with --tls-key). Clients use https:// URLs "
    "(RemoteDataset(cafile=...) for a self-signed certificate).",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="PEM private key of --tls-cert.",
)
def serve(
    datasets: tuple[str, ...],
    host: str,
    port: int,
    token: str | None,
    workers: int,
    client_workers: int | None,
    client_max_requests: int,
    max_connections: int,
    local_socket: str,
    tls_cert: str | None,
    tls_key: str | None,
) -> None:
    """Serve DATASET... read-only: a web page at / and a JSON + binary API.

    Each DATASET is NAME=PATH, or a PATH named after its file (train.mrecord0 -> train).
    Only these datasets are served; requests name them, never a path.

    \b
    Examples:
      mrecord serve train.mrecord0                      # http://127.0.0.1:8750/
      mrecord serve train=/data/train.mrecord0 val=/data/val.mrecord0 --port 9000
      MRECORD_SERVE_TOKEN=s3cret mrecord serve train.mrecord0 --host 0.0.0.0
      mrecord serve train.mrecord0 --host 10.0.0.5 --tls-cert c.pem --tls-key k.pem

    GET /healthz answers ok; GET /metrics is Prometheus text (with the token).
    """
    from mrecord.serve.server.registry import parse_dataset_args
    from mrecord.serve.server.run import local_socket_path
    from mrecord.serve.server.run import serve as run
    from mrecord.serve.server.security import check_bind
    from mrecord.storage.locate import locate_dataset

    # Resolved (a folder, a base name) and checked before saying "serving": a missing
    # dataset fails here, with its hint, not after the banner.
    paths = {name: locate_dataset(path) for name, path in parse_dataset_args(datasets).items()}
    check_bind(host, token)
    shown = "[::1]" if host == "::1" else host
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    scheme = "https" if tls_cert else "http"
    click.echo(
        f"serving {', '.join(paths)} on {scheme}://{shown}:{port}/ (Ctrl-C stops)", err=True
    )
    socket_path = local_socket_path(local_socket)
    if socket_path is not None:
        click.echo(f"same-host readers: {socket_path}", err=True)
    run(
        paths,
        host=host,
        port=port,
        token=token,
        workers=workers,
        client_workers=client_workers,
        client_max_requests=client_max_requests,
        max_connections=max_connections,
        local_socket=socket_path,
        tls_cert=tls_cert,
        tls_key=tls_key,
    )
