"""The README's tables name every attribute, metric and resource key in lens_core.semconv, and every span name."""

import pathlib

from lens_core import semconv
from lens_core.catalogs import rl

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_every_semconv_name_has_a_row_in_the_vocabulary_table():
    names = {getattr(semconv, n) for n in semconv.__all__ if isinstance(getattr(semconv, n), str)}
    names -= {semconv.SCHEMA_URL, semconv.SEMCONV_VERSION}
    missing = sorted(name for name in names if f"| `{name}` |" not in README)
    assert missing == [], f"README's vocabulary table lacks rows for {missing}"


def test_the_declared_schema_is_in_the_readme():
    assert semconv.SCHEMA_URL in README and semconv.SEMCONV_VERSION in README


def test_every_catalogued_span_name_has_a_row():
    missing = sorted(name for name in rl.SPAN_GROUPS if f"| `{name}` |" not in README)
    assert missing == []
