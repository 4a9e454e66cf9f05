"""``mrecord audit DIR``: check a visitation audit written by ``mrecord.torch``."""

from __future__ import annotations

import click

__all__ = ["audit_command"]


@click.command("audit")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--epoch", "epochs", type=int, multiple=True, help="Check only this epoch (repeat).")
def audit_command(directory: str, epochs: tuple[int, ...]) -> None:
    """Prove every sample was delivered exactly once per epoch across ranks.

    DIRECTORY is the audit_dir given to mrecord.torch.StreamingDataset. Prints one line
    per epoch; exits 1 when a sample was delivered twice or never (listed).
    """
    from mrecord.torch.audit import audit

    report = audit(directory, list(epochs) or None)
    click.echo(report.summary())
    if not report.ok:
        raise click.exceptions.Exit(1)
