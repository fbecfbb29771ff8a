"""One exit code per error class, for every ``adamem`` command, and the refusals made before any work.

``EXIT_CODES`` is the table the README and ``adamem --help`` show; ``exit_code`` is the code an
error's class carries. Reading commands (``log dump``, ``memory``, ``query``, …) call ``require_log`` and
``require_store`` first: opening a missing embedded log or store would create it, so a typo in
``--log`` or ``--store`` would read an empty one and look like success.
"""

from __future__ import annotations

import socket

from adamem.errors import AdaMemError, ConfigError, NotFound
from adamem.settings import Settings

__all__ = [
    "CHECK_FAILED",
    "EXIT_CODES",
    "EXIT_HELP",
    "INTERRUPTED",
    "OUTPUT_CLOSED",
    "exit_code",
    "require_free_port",
    "require_log",
    "require_store",
    "store_exists",
]

CHECK_FAILED = 1
INTERRUPTED = 130
OUTPUT_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for a Unix tool whose reader went away

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success"),
    (CHECK_FAILED, "a check found a problem: replay --verify differences, log check damage, forget --verify text"),
    (2, "usage: a bad argument, option or setting (argparse's own errors too)"),
    (3, "not found: no log, store, input file, memory owner, item or message where one was named"),
    (4, "invalid input: records that fail validation (nothing was published) or bytes that do not decode"),
    (5, "the log, the store or the service failed: damaged, locked by another writer, broker or service (--url) "
        "unreachable, store to rebuild"),
    (6, "a model (extractor or embedder endpoint) failed"),
    (INTERRUPTED, "interrupted (Ctrl-C)"),
    (OUTPUT_CLOSED, "the reader of the output went away (e.g. `| head`): the command stops quietly"),
)  # fmt: skip
"""(code, meaning): what each exit code says. An error's code is its class's ``exit_code`` (``adamem.errors``)."""

EXIT_HELP = "exit codes:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)


def exit_code(exc: AdaMemError) -> int:
    """The exit code of an error: the one its class carries."""
    return exc.exit_code


def require_log(settings: Settings) -> None:
    """Refuse a missing embedded log (opening it would create it); a Kafka log answers for itself."""
    folder = settings.log.folder
    if folder is not None and not folder.is_dir():
        raise NotFound(
            f"no embedded log at {folder}: the folder does not exist. Check --log (or $ADAMEM_LOG); "
            f"`adamem publish FILE --log {folder}` starts one"
        )


def store_exists(settings: Settings) -> bool:
    """Whether the configured store's folder exists (an in-memory store always does)."""
    folder = settings.store.folder
    return folder is None or folder.is_dir()


def require_store(settings: Settings) -> None:
    """Refuse a missing store folder, saying so, rather than reporting every owner as unknown."""
    folder = settings.store.folder
    if folder is not None and not folder.is_dir():
        raise NotFound(
            f"no store at {folder}: the folder does not exist. Check --store (or $ADAMEM_STORE); "
            f"`adamem project --log LOG --store {folder}` builds one from the log"
        )


def require_free_port(host: str, port: int) -> None:
    """Refuse to start a service on a port something already listens on, before saying where it serves."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc} (another `adamem serve`?). Stop it, or "
                f"choose another port: ADAMEM_PORT={port + 1} (`adamem serve` also takes --port)"
            ) from exc
