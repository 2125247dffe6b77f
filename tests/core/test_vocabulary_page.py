"""docs/reference/vocabulary.md's tables name every attribute, metric and resource key in lens_core.semconv, and every span name."""

import pathlib

from lens_core import semconv
from lens_core.catalogs import rl

PAGE = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference" / "vocabulary.md").read_text(encoding="utf-8")


def test_every_semconv_name_has_a_row_in_the_vocabulary_table():
    names = {getattr(semconv, n) for n in semconv.__all__ if isinstance(getattr(semconv, n), str)}
    names -= {semconv.SCHEMA_URL, semconv.SEMCONV_VERSION}
    missing = sorted(name for name in names if f"| `{name}` |" not in PAGE)
    assert missing == [], f"docs/reference/vocabulary.md's table lacks rows for {missing}"


def test_the_declared_schema_is_in_the_vocabulary_page():
    assert semconv.SCHEMA_URL in PAGE and semconv.SEMCONV_VERSION in PAGE


def test_every_catalogued_span_name_has_a_row():
    missing = sorted(name for name in rl.SPAN_GROUPS if f"| `{name}` |" not in PAGE)
    assert missing == []
