"""Exit statuses every ``lens`` subcommand uses, so scripts and CI can tell failures apart."""

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_NO_DATA", "EXIT_OK", "EXIT_USAGE"]

EXIT_OK = 0
"""The command did what was asked and found nothing wrong."""

EXIT_FAILED = 1
"""The command ran and found what it checks for: invariant violations (``report --strict``),
an import over budget, a benchmark ratio out of bounds, spans that could not be exported."""

EXIT_USAGE = 2
"""The command line was wrong: an unknown option, a bad value, a path that does not exist
(argparse's own status for usage errors)."""

EXIT_NO_DATA = 3
"""The input held nothing to work on (e.g. no span could be read from any file)."""

EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (SIGINT): 128 + the signal's number, as shells report it."""
