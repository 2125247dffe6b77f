"""Install hints for the optional extras, spelled so they work for wheel users (and in zsh)."""

from __future__ import annotations

__all__ = ["MissingExtraError", "install_command", "missing_otel", "one_line_if_uncaught"]

# Top-level packages the ``otel`` extra brings in (the SDK, OTLP exporters, protobuf, gRPC).
_OTEL_PACKAGES = frozenset({"opentelemetry", "google", "grpc"})


def install_command(*extras: str) -> str:
    """``pip install 'lens-telemetry[otel,torch]'`` (quoted: zsh reads unquoted [] as a glob)."""
    return f"pip install 'lens-telemetry[{','.join(extras)}]'"


class MissingExtraError(ModuleNotFoundError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def missing_otel(exc: BaseException, what: str):
    """A MissingExtraError explaining ``exc`` when it is a missing OpenTelemetry (or protobuf
    / gRPC) module, else None. ``what`` names what needed it (e.g. "exporting telemetry")."""
    if not isinstance(exc, ModuleNotFoundError) or isinstance(exc, MissingExtraError):
        return None
    name = exc.name or ""
    if name.split(".")[0] not in _OTEL_PACKAGES:
        return None
    return MissingExtraError(
        f"{what}: OpenTelemetry is not installed (no module named {name!r}); "
        f"install Lens's otel extra: {install_command('otel')}", name=name)


_hooked = False


def one_line_if_uncaught() -> None:
    """From now on, a MissingExtraError that nothing catches ends the process with its one
    line on stderr (``lens: ...pip install 'lens-telemetry[otel]'``) instead of a traceback:
    the frames of a missing package tell a user nothing the line does not. Every other
    exception reaches the hook that was installed before. Installed once, by the raise."""
    global _hooked
    if _hooked:
        return
    import sys

    previous = sys.excepthook

    def excepthook(kind, value, traceback):
        if isinstance(value, MissingExtraError):
            sys.stderr.write(f"lens: {value}\n")
        else:
            previous(kind, value, traceback)

    sys.excepthook = excepthook
    _hooked = True
