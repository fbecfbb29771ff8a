"""The ``adamem`` command: the entry points, on top of every layer they wire together.

``main`` parses the command line (``main.py``); ``commands.py`` runs each command by wiring the
log, the store, the Memory Agent and the query service from settings. Nothing imports this package.
"""

from adamem.cli.main import SERVICE_THREADS, main

__all__ = ["SERVICE_THREADS", "main"]
