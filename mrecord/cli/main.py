"""Entry point of the ``mrecord`` command (``mrecord = "mrecord.cli.main:main"``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from mrecord import __version__
from mrecord.cli._errors import EXIT_INTERRUPTED, CommandError, exit_code_for
from mrecord.errors import MrecordError

__all__ = ["cli", "main"]

_HELP = """Convert, inspect, check and benchmark mrecord datasets.

\b
Examples:
  mrecord convert cifar10 cifar-10-batches-bin/ cifar_train.mrecord --shards 4
  mrecord convert mindrecord old/train.mindrecord0 train.mrecord
  mrecord info train.mrecord
  mrecord head train.mrecord -n 3
  mrecord verify train.mrecord0
  mrecord stats train.mrecord --json
  mrecord cat train.mrecord --format jsonl > rows.jsonl
  mrecord bench train.mrecord
  mrecord serve train.mrecord0 --port 8750
  mrecord audit runs/audit
  mrecord shuffle-report train.mrecord --label-column label

\b
Exit codes:
  0    success
  1    verify found damage, or audit found a sample delivered twice or never
  2    usage error (bad option, output exists without --overwrite)
  3    bad input file (missing, unreadable, truncated, wrong format, corrupt, no .db)
  4    other failure (dataset locked by another writer, ...)
  5    the machine failed a write (disk full, quota, permission, read-only, I/O error)
  130  interrupted
"""


class _Group(click.Group):
    """A group that turns library errors into one-line messages and exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            raise CommandError("interrupted", EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            # The reader of our output went away (`mrecord cat ... | head`): stop quietly.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise click.exceptions.Exit(0) from None
        except (MrecordError, OSError, ValueError, ImportError) as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            raise CommandError(_one_line(exc), exit_code_for(exc)) from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in text:
        text = f"{exc.filename!r}: {text}"
    return text or type(exc).__name__


@click.group(cls=_Group, help=_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mrecord")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """The ``mrecord`` command group."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _register() -> None:
    from mrecord.cli.audit import audit_command
    from mrecord.cli.bench import bench
    from mrecord.cli.cat import cat
    from mrecord.cli.convert import convert
    from mrecord.cli.inspect import head, info, reindex, verify
    from mrecord.cli.serve import serve
    from mrecord.cli.shuffle_report import shuffle_report
    from mrecord.cli.stats import stats

    for command in (
        convert, info, head, verify, reindex, stats, cat, bench, serve, audit_command,
        shuffle_report,
    ):
        cli.add_command(command)


_register()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``); exits with its code."""
    cli.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name="mrecord")


if __name__ == "__main__":
    main()
