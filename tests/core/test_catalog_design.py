"""The RL catalog covers every span name and efficiency category of the NeMo-RL telemetry design."""

import pathlib
import re

import pytest

from lens_core import efficiency, semconv
from lens_core.catalogs import rl
from lens_core.registry import Bucket

DATA = pathlib.Path(__file__).parent / "data"
SEEDS = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "seeds"


def _rows(name):
    lines = (DATA / name).read_text().splitlines()
    return [line.split("\t") for line in lines if line and not line.startswith("#")]


SPAN_ROWS = _rows("nemo_rl_design_spans.tsv")
CATEGORY_ROWS = _rows("nemo_rl_design_categories.tsv")


def _catalog_bucket(name, group):
    """The bucket the catalog gives ``name`` when ``group`` emits it (``none``: never bucketed)."""
    if group in rl.UMBRELLAS or name in rl.NEVER_BUCKETED:
        return "none"
    if group == rl.RLSpanGroup.EFFICIENCY:
        category = name.removeprefix("rl.").replace(".", "/", 1)
        return rl.EFFICIENCY_CATEGORY_BUCKET.get(category) or "none"
    return rl.BUCKETS[group]


@pytest.mark.parametrize("name,groups,bucket,table", SPAN_ROWS, ids=[row[0] for row in SPAN_ROWS])
def test_every_design_span_is_catalogued_with_its_groups_and_bucket(name, groups, bucket, table):
    """A span name of the design's tables is in the catalog, under the same groups, with the same bucket."""
    expected = tuple(groups.split(","))
    assert rl.groups_of_span(name) == expected, f"{name} ({table}): catalog says {rl.groups_of_span(name)}"
    for group in expected:
        rl.check_span_name(group, name)
    assert _catalog_bucket(name, expected[0]) == bucket


def test_the_catalog_has_no_span_the_design_lacks():
    """Every catalogued span name is a row of the design extract (the two lists are the same set)."""
    assert set(rl.SPAN_GROUPS) == {row[0] for row in SPAN_ROWS}


def test_check_span_name_rejects_single_controller_names_under_the_wrong_group():
    """check_span_name covers the SingleController and SFT v2 names: a wrong group is named in the error."""
    with pytest.raises(ValueError, match="belongs to group 'step'"):
        rl.check_span_name(rl.RLSpanGroup.POLICY_UPDATE, rl.SingleController.STEP)
    with pytest.raises(ValueError, match="belongs to group 'data_processing'"):
        rl.check_span_name(rl.RLSpanGroup.STEP, rl.SFTv2.READ_BATCH)


@pytest.mark.parametrize("category,emitted,bucket,measurement", CATEGORY_ROWS, ids=[row[0] for row in CATEGORY_ROWS])
def test_every_design_category_has_its_emission_rule(category, emitted, bucket, measurement):
    """Span categories carry the design's bucket (or none); timer-only ones are never spans."""
    if emitted == "timer-only":
        assert category in rl.TIMER_ONLY_CATEGORIES
        assert efficiency.span_name_for(category) not in rl.SPAN_GROUPS
    else:
        assert category not in rl.TIMER_ONLY_CATEGORIES
        assert (rl.EFFICIENCY_CATEGORY_BUCKET[category] or "none") == bucket
        assert efficiency.span_name_for(category) in rl.SPAN_GROUPS
    assert rl.category_measurement(category) == measurement


# Names of the form rl.* in the design's prose that are neither span names nor attributes:
# templates and the monitor-derived ratio the design says NeMo-RL does not emit.
_NOT_NAMES = {"rl.goodput"}


def _attribute_names():
    return {value for key, value in vars(semconv).items() if key.isupper() and isinstance(value, str)}


def test_every_rl_name_in_the_design_text_is_known():
    """Walk the whole design text: each ``rl.x.y`` it spells is a catalogued span or a semconv attribute/metric."""
    seeds = sorted(SEEDS.glob("000_*.txt")) if SEEDS.is_dir() else []
    if not seeds:
        pytest.skip(f"needs the seed design text (000_*.txt) in {SEEDS}, beside a workspace checkout; "
                    "the checked-in extract is tested above")
    text = seeds[0].read_text(encoding="utf-8")
    names = set(re.findall(r"\brl\.[a-z_0-9]+(?:\.[a-z_0-9]+)*", text))
    names = {name.rstrip(".") for name in names if "<" not in name}
    known = set(rl.SPAN_GROUPS) | _attribute_names() | _NOT_NAMES
    # a family the prose names by its prefix (rl.sc, rl.data_plane) is known when it prefixes a span
    families = {name.rsplit(".", 1)[0] for name in rl.SPAN_GROUPS}
    missing = sorted(name for name in names if name not in known and name not in families)
    assert not missing, f"design names missing from the catalog or semconv: {missing}"
    # and the design's span tables are exactly the extract's rows
    extract = {row[0] for row in SPAN_ROWS}
    assert {name for name in names if name in rl.SPAN_GROUPS} <= extract


def test_an_unknown_bucket_value_is_not_a_bucket():
    """The four buckets are the only values rl.bucket may hold (the guard's reference list)."""
    assert set(Bucket.ALL) == {"productive", "overhead", "idle", "wasted"}
