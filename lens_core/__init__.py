"""lens_core: span-group-gated instrumentation primitives (stdlib only; off costs one lookup)."""

# The public names load on first use (PEP 562), each from the module that defines it, so
# `import lens_core` costs almost nothing and a process pays only for what it touches: a
# quiet rank's setup never loads the gate, the recorder, redaction or the carrier.

TYPE_CHECKING = False
if TYPE_CHECKING:  # what checkers see; the interpreter resolves these in __getattr__ below
    from ._impl import IMPLEMENTATION
    from .backend import SpanBackend
    from .config import LensConfig
    from .efficiency import (IdleWait, deferred_child_span, efficiency_span, record_efficiency_time,
                             start_efficiency_span)
    from .export_ranks import (export_strategies, get_export_strategy, register_export_strategy,
                               unregister_export_strategy)
    from .registry import Bucket, SpanRegistry
    from .scopes import bucket_scope, in_per_prompt_scope, iteration_scope, per_prompt_scope, span_attributes
    from .spans import (DEFAULT_REDACT_KEYS, current_trace_carrier, is_span_group_enabled, managed_span,
                        redact_value, remote_trace_context, safe_set_span_attributes, span_cm, trace_fn,
                        umbrella_span, umbrella_trace_fn)
    from .state import (enabled_span_groups, get_pp_trace_carrier, install_backend, installed_backend,
                        pending_span_groups, set_enabled_span_groups, set_pp_trace_carrier, set_span_group_spec,
                        span_group_diagnostics, uninstall_backend)

#: module -> the public names it gives lens_core
_HOMES = {
    "_impl": ("IMPLEMENTATION",),
    "backend": ("SpanBackend",),
    "config": ("LensConfig",),
    "efficiency": ("IdleWait", "deferred_child_span", "efficiency_span", "record_efficiency_time",
                   "start_efficiency_span"),
    "export_ranks": ("export_strategies", "get_export_strategy", "register_export_strategy",
                     "unregister_export_strategy"),
    "registry": ("Bucket", "SpanRegistry"),
    "scopes": ("bucket_scope", "in_per_prompt_scope", "iteration_scope", "per_prompt_scope", "span_attributes"),
    "spans": ("DEFAULT_REDACT_KEYS", "current_trace_carrier", "is_span_group_enabled", "managed_span",
              "redact_value", "remote_trace_context", "safe_set_span_attributes", "span_cm", "trace_fn",
              "umbrella_span", "umbrella_trace_fn"),
    "state": ("enabled_span_groups", "get_pp_trace_carrier", "install_backend", "installed_backend",
              "pending_span_groups", "set_enabled_span_groups", "set_pp_trace_carrier", "set_span_group_spec",
              "span_group_diagnostics", "uninstall_backend"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

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
    "record_efficiency_time",
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


def __getattr__(name: str):
    """Load a public name from its module on first use, and keep it here."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'lens_core' has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{home}", fromlist=(name,)), name)
    globals()[name] = value  # a gate switch (_impl.use) rebinds it here from now on
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
