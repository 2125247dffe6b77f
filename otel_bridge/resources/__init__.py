"""Resource detection (local, SLURM, Kubernetes, GPU) and the ``OTEL_RESOURCE_ATTRIBUTES`` format."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from urllib.parse import unquote_to_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is imported by checkers only
    from typing import Mapping, Optional

from otel_bridge.resources.dl import (
    detect_software,
    detect_topology,
    process_attributes,
    topology_attributes,
    training_attributes,
)
from otel_bridge.resources.gpu import detect_gpu
from otel_bridge.resources.k8s import detect_k8s
from otel_bridge.resources.local import detect_local
from otel_bridge.resources.slurm import detect_slurm

__all__ = [
    "OTEL_RESOURCE_ATTRIBUTES",
    "detect_gpu",
    "detect_k8s",
    "detect_local",
    "detect_resource_attributes",
    "detect_slurm",
    "detect_software",
    "detect_topology",
    "encode_resource_attributes",
    "parse_resource_attributes",
    "process_attributes",
    "publish_resource_attributes",
    "topology_attributes",
    "training_attributes",
]

OTEL_RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"
"""The environment variable child processes' OpenTelemetry SDKs read resource attributes from."""

_logger = logging.getLogger(__name__)

# The spec's format is W3C baggage without properties. A key is an RFC 7230 token; a value
# is baggage-octets (printable ASCII except space " , ; \) with everything else, and "%"
# itself, percent-encoded as UTF-8.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"(?:[\x21\x23\x24\x26-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]|%[0-9A-Fa-f]{2})*")
_PLAIN = frozenset(b"\x21\x23\x24" + bytes(range(0x26, 0x2C)) + bytes(range(0x2D, 0x3B))
                   + bytes(range(0x3C, 0x5C)) + bytes(range(0x5D, 0x7F)))


def detect_resource_attributes(environ=None, *, local_rank=None) -> dict:
    """Local, SLURM, Kubernetes and GPU attributes merged in that order (later ones win)."""
    environ = os.environ if environ is None else environ
    attrs = detect_local(environ)
    attrs.update(detect_slurm(environ))
    attrs.update(detect_k8s(environ))
    attrs.update(detect_gpu(environ, local_rank))
    return attrs


def _as_text(value) -> str | None:
    """The string form of an attribute value, or None when it has none that encodes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates
            return None
        return value
    return None


def _encode_value(text: str) -> str:
    return "".join(chr(b) if b in _PLAIN else f"%{b:02X}" for b in text.encode("utf-8"))


def _decode_value(text: str) -> str | None:
    if not _VALUE.fullmatch(text):
        return None
    try:
        return unquote_to_bytes(text).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _parse(text):
    """(attributes, the entries that were dropped)."""
    attrs, bad = {}, []
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), _decode_value(value.strip())
        if not sep or not _TOKEN.fullmatch(key) or value is None:
            bad.append(item.strip())
            continue
        attrs[key] = value
    return attrs, bad


def _warn_dropped(bad):
    if bad:
        _logger.warning("lens: dropped malformed %s entries: %s", OTEL_RESOURCE_ATTRIBUTES,
                        ", ".join(repr(entry) for entry in bad))


def parse_resource_attributes(text) -> dict:
    """Parse ``key1=value1,key2=value2`` (values percent-decoded); the last duplicate wins and
    malformed entries are dropped with one warning naming them."""
    attrs, bad = _parse(text)
    _warn_dropped(bad)
    return attrs


def encode_resource_attributes(attrs: Mapping[str, object], inherited: Optional[str] = None) -> str:
    """Format ``attrs`` for ``OTEL_RESOURCE_ATTRIBUTES``, after the entries of ``inherited``
    (an existing value) that ``attrs`` does not override.

    Values are str, bool (``true``/``false``), int or float; keys must be RFC 7230 tokens.
    Anything else is dropped with one warning naming it.
    """
    merged, bad = _parse(inherited)
    for key, value in attrs.items():
        text = _as_text(value)
        if not isinstance(key, str) or not _TOKEN.fullmatch(key) or text is None:
            bad.append(f"{key!r}={value!r}")
            continue
        merged[key] = text
    _warn_dropped(bad)
    return ",".join(f"{key}={_encode_value(value)}" for key, value in merged.items())


@contextlib.contextmanager
def publish_resource_attributes(attrs, environ=os.environ):
    """Set ``OTEL_RESOURCE_ATTRIBUTES`` to ``attrs`` merged over its current value for child
    processes started in the block; on exit restore it exactly (unset if it was unset)."""
    before = environ.get(OTEL_RESOURCE_ATTRIBUTES)
    value = encode_resource_attributes(attrs, inherited=before)
    environ[OTEL_RESOURCE_ATTRIBUTES] = value
    try:
        yield value
    finally:
        if before is None:
            environ.pop(OTEL_RESOURCE_ATTRIBUTES, None)
        else:
            environ[OTEL_RESOURCE_ATTRIBUTES] = before
