"""``python -m mrecord.cli``: the same as the ``mrecord`` command."""

from mrecord.cli.main import main

main()
