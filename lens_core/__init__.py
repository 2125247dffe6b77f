"""lens_core: span-group-gated instrumentation primitives (stdlib only; off costs one lookup)."""

from ._impl import IMPLEMENTATION
from .backend import SpanBackend
from .config import LensConfig
from .efficiency import IdleWait, deferred_child_span, efficiency_span, start_efficiency_span
from .export_ranks import (
    export_strategies,
    get_export_strategy,
    register_export_strategy,
    unregister_export_strategy,
)
from .registry import Bucket, SpanRegistry
from .scopes import (
    bucket_scope,
    in_per_prompt_scope,
    iteration_scope,
    per_prompt_scope,
    span_attributes,
)
from .spans import (
    DEFAULT_REDACT_KEYS,
    current_trace_carrier,
    is_span_group_enabled,
    managed_span,
    redact_value,
    remote_trace_context,
    safe_set_span_attributes,
    span_cm,
    trace_fn,
    umbrella_span,
    umbrella_trace_fn,
)
from .state import (
    enabled_span_groups,
    get_pp_trace_carrier,
    install_backend,
    installed_backend,
    pending_span_groups,
    set_enabled_span_groups,
    set_pp_trace_carrier,
    set_span_group_spec,
    span_group_diagnostics,
    uninstall_backend,
)

__all__ = [
    "Bucket",
    "DEFAULT_REDACT_KEYS",
    "IMPLEMENTATION",
    "IdleWait",
    "LensConfig",
    "SpanBackend",
    "SpanRegistry",
    "bucket_scope",
    "current_trace_carrier",
    "deferred_child_span",
    "efficiency_span",
    "enabled_span_groups",
    "export_strategies",
    "get_export_strategy",
    "get_pp_trace_carrier",
    "in_per_prompt_scope",
    "install_backend",
    "installed_backend",
    "is_span_group_enabled",
    "iteration_scope",
    "managed_span",
    "pending_span_groups",
    "per_prompt_scope",
    "redact_value",
    "register_export_strategy",
    "remote_trace_context",
    "safe_set_span_attributes",
    "set_enabled_span_groups",
    "set_pp_trace_carrier",
    "set_span_group_spec",
    "span_attributes",
    "span_cm",
    "span_group_diagnostics",
    "start_efficiency_span",
    "trace_fn",
    "umbrella_span",
    "umbrella_trace_fn",
    "uninstall_backend",
    "unregister_export_strategy",
]
