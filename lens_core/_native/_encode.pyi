"""Type stubs for the compiled OTLP encoders (lens_core._native._encode); _encode_py is its twin."""

from typing import Iterable, Sequence

from lens_core._native._recorder import Span

__all__ = ["encode_traces_json", "encode_traces_pb"]

def encode_traces_pb(resource: bytes, scopes: Sequence[bytes], records: Iterable[Span],
                     resource_schema_url: str = ..., scope_schema_urls: Sequence[str] = ...) -> bytes: ...
def encode_traces_json(resource: str, scopes: Sequence[str], records: Iterable[Span],
                       resource_schema_url: str = ..., scope_schema_urls: Sequence[str] = ...) -> str: ...
