"""Attribute safety: what safe_set_span_attributes keeps, drops, counts, warns about and redacts."""

import enum
import logging

import pytest

import lens_core
from lens_core import DEFAULT_REDACT_KEYS, redact_value, safe_set_span_attributes
from lens_core.spans import REDACTED, dropped_attribute_count


class Color(enum.IntEnum):
    RED = 1


class FakeSpan:
    """A span outside any backend: collects set_attributes calls."""

    def __init__(self):
        self.attributes = {}

    def set_attributes(self, attrs):
        self.attributes.update(attrs)


def lens_warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "lens_core" and r.levelno == logging.WARNING]


# ---- keeping and dropping -----------------------------------------------------------------------


def test_none_span_is_accepted():
    before = dropped_attribute_count()
    safe_set_span_attributes(None, {"a": 1, "bad": object()})
    assert dropped_attribute_count() == before  # nothing was even looked at


def test_scalars_and_homogeneous_sequences_are_kept():
    span = FakeSpan()
    safe_set_span_attributes(span, {
        "b": True, "i": 3, "f": 0.5, "s": "x",
        "ints": [1, 2], "strs": ("a", "b"), "floats": [1.5], "bools": [True, False], "empty": [],
    })
    assert span.attributes == {
        "b": True, "i": 3, "f": 0.5, "s": "x",
        "ints": (1, 2), "strs": ("a", "b"), "floats": (1.5,), "bools": (True, False), "empty": (),
    }


def test_scalar_subclasses_become_their_plain_type():
    span = FakeSpan()
    safe_set_span_attributes(span, {"color": Color.RED, "colors": [Color.RED, 2]})
    assert span.attributes == {"color": 1, "colors": (1, 2)}
    assert type(span.attributes["color"]) is int


def test_none_values_are_dropped_without_counting():
    span = FakeSpan()
    before = dropped_attribute_count()
    safe_set_span_attributes(span, {"gone": None, "kept": 1})
    assert span.attributes == {"kept": 1}
    assert dropped_attribute_count() == before


@pytest.mark.parametrize("value", [
    {"a": 1}, object(), [1, "two"], [1, 2.0], [1, True], [None], [[1]], {1, 2}, b"bytes", 1j,
], ids=["dict", "object", "mixed-str", "mixed-float", "mixed-bool", "none-item", "nested", "set", "bytes", "complex"])
def test_other_types_are_dropped_and_counted(value):
    span = FakeSpan()
    before = dropped_attribute_count()
    safe_set_span_attributes(span, {"bad": value, "kept": "yes"})
    assert span.attributes == {"kept": "yes"}
    assert dropped_attribute_count() == before + 1


def test_non_str_keys_are_dropped_and_counted():
    span = FakeSpan()
    before = dropped_attribute_count()
    safe_set_span_attributes(span, {1: "one", "kept": 1})
    assert span.attributes == {"kept": 1}
    assert dropped_attribute_count() == before + 1


def test_a_dropped_attribute_warns_once_per_key_and_type(caplog):
    caplog.set_level(logging.WARNING, logger="lens_core")
    before = dropped_attribute_count()
    for _ in range(3):
        safe_set_span_attributes(FakeSpan(), {"cfg": {"lr": 1}})
    safe_set_span_attributes(FakeSpan(), {"cfg": object()})
    assert dropped_attribute_count() == before + 4
    assert lens_warnings(caplog) == [
        "span attribute 'cfg' dropped: dict is not a bool/int/float/str or a homogeneous sequence of them",
        "span attribute 'cfg' dropped: object is not a bool/int/float/str or a homogeneous sequence of them",
    ]


def test_attributes_go_through_the_installed_backend(recorder):
    with lens_core.span_cm("s") as span:
        safe_set_span_attributes(span, {"late": 1, "bad": {}, "password": "hunter2"})
    assert recorder.spans[0].attributes == {"late": 1, "password": REDACTED}


# ---- redaction ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [
    "openai.api_key", "HF_TOKEN", "user.prompt", "password", "x-authorization", "api_key", "Secret",
])
def test_secret_keys_are_redacted(key):
    assert redact_value(key, "sk-live-123") == REDACTED
    assert redact_value(key, ["a", "b"]) == REDACTED


@pytest.mark.parametrize("key", ["monkey", "keyboard", "secretary", "rl.num_groups", "author", "context"])
def test_keys_that_only_resemble_secrets_are_not_redacted(key):
    assert redact_value(key, "visible") == "visible"


@pytest.mark.parametrize("value", [8, 0.25, True, (1, 2)])
def test_numbers_are_never_redacted(value):
    assert redact_value("rl.num_prompt_groups", value) == value
    assert redact_value("api_key", value) == value


def test_text_under_a_key_with_a_secret_part_is_redacted():
    assert redact_value("rl.num_prompt_groups", "eight") == REDACTED


def test_custom_redact_keys_replace_the_defaults():
    assert redact_value("password", "x", redact_keys=frozenset({"ssn"})) == "x"
    assert redact_value("user.ssn", "123", redact_keys=frozenset({"ssn"})) == REDACTED


def test_default_redact_keys_are_the_documented_set():
    assert DEFAULT_REDACT_KEYS == {
        "password", "passwd", "pwd", "passphrase", "secret", "token", "key", "apikey", "accesskey",
        "secretkey", "privatekey", "auth", "authorization", "credential", "cred", "cookie", "bearer", "jwt",
        "prompt", "text",
    }


def test_the_redaction_cache_stays_bounded_for_keys_built_at_run_time():
    """Regression: every distinct attribute key was cached forever, so keys built at run
    time (f"item.{i}") grew the cache without bound."""
    from lens_core import redaction, spans

    for i in range(redaction._KEY_CACHE_LIMIT + 500):
        spans.sanitize_attributes({f"item.{i}.label": "x"})
    assert len(redaction._key_cache) <= redaction._KEY_CACHE_LIMIT
    assert spans.redact_value(f"item.{10**6}.token", "secret") == spans.REDACTED
