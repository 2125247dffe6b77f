"""The reference pages against the code, both ways: docs/reference/configuration.md names every LENS_* variable
the code reads and no other; docs/reference/cli.md every `lens` command and argument the parsers know and no
other; docs/reference/vocabulary.md no name that lens_core.semconv or the RL catalog lacks."""

import argparse
import re
from collections.abc import Mapping

from doc_pages import REPO, section, table_first_cells

CONFIGURATION = REPO / "docs" / "reference" / "configuration.md"
CLI = REPO / "docs" / "reference" / "cli.md"
VOCABULARY = REPO / "docs" / "reference" / "vocabulary.md"

PACKAGES = ("lens_core", "lens_report", "lens_ci", "lens_cli", "otel_bridge")
# any spelling of a LENS_ variable in a file: quoted, as a shell's $NAME or ${NAME}, or NAME=
_MENTION = re.compile(r"""["'](LENS_[A-Z0-9_]+)["']|\$\{?(LENS_[A-Z0-9_]+)|(?:^|\s)(LENS_[A-Z0-9_]+)=""", re.M)
# a module-level constant of that name (semconv's LENS_GROUP, ...) is a Python name, not a variable
_CONSTANT = re.compile(r"^(LENS_[A-Z0-9_]+)\s*[:=]", re.M)


def _sources(*roots):
    for root in roots:
        path = REPO / root
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()
                                                and (p.suffix in (".py", ".pyx", ".sh") or p.parent.name == ".ci")]
        for file in files:
            yield file, file.read_text(encoding="utf-8", errors="replace")


class _Recording(Mapping):
    """An empty environment that remembers every name looked up in it."""

    def __init__(self):
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        raise KeyError(key)

    def get(self, key, default=None):
        self.read.add(key)
        return default

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0


def _config_variables():
    from lens_core import LensConfig

    environ = _Recording()
    LensConfig.from_env(environ=environ)
    return {name for name in environ.read if name.startswith("LENS_")}


def _constants():
    constants = set()
    for _file, text in _sources(*PACKAGES):
        constants |= set(_CONSTANT.findall(text))
    return constants


def _mentioned(*roots):
    found = set()
    for _file, text in _sources(*roots):
        found |= {name for match in _MENTION.findall(text) for name in match if name}
    return found - _constants()


def _user_variables():
    """What LensConfig.from_env looks up, and every other LENS_ name the packages and setup.py quote (an
    environment read, or the name a helper is given to read) that is not one of their constants."""
    return _config_variables() | _mentioned(*PACKAGES, "setup.py")


def _suite_variables():
    return _mentioned("tests", "bench", ".ci") - _user_variables()


def _documented(heading):
    return {cell.strip("`") for cell in table_first_cells(section(CONFIGURATION, heading))}


def test_the_configuration_page_names_every_variable_the_code_reads():
    documented = _documented("## Job settings") | _documented("## Install and implementation")
    assert _config_variables() <= _documented("## Job settings"), "LensConfig.from_env reads variables the page lacks"
    assert sorted(_user_variables() - documented) == [], "read by the code, missing from the page"
    assert sorted(documented - _user_variables()) == [], "on the page, read by no code"


def test_the_configuration_page_names_every_variable_the_tests_and_benchmarks_read():
    documented = _documented("## Tests and benchmarks")
    suite = _suite_variables()
    assert sorted(suite - documented) == [], "read by the suite, benchmarks or CI, missing from the page"
    assert sorted(documented - suite) == [], "on the page, read by no test, benchmark or CI script"


def _commands():
    from lens_cli.main import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def _arguments(parser):
    """The first spelling of each argument the user can give (positionals by their metavar or name)."""
    names = set()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        names.add(action.option_strings[-1] if action.option_strings else (action.metavar or action.dest))
    return names


def test_the_cli_page_has_every_command_and_no_other():
    headings = set(re.findall(r"^## lens (\S+)$", CLI.read_text(encoding="utf-8"), flags=re.M))
    assert headings == set(_commands())


def test_the_cli_page_lists_every_argument_of_every_command_and_no_other():
    for name, parser in _commands().items():
        rows = table_first_cells(section(CLI, f"## lens {name}"))
        documented = {row.strip("`").split()[0] for row in rows}
        assert documented == _arguments(parser), f"lens {name}"


def test_the_vocabulary_page_names_nothing_the_code_lacks():
    from lens_core import semconv
    from lens_core.catalogs import rl

    names = {getattr(semconv, n) for n in semconv.__all__ if isinstance(getattr(semconv, n), str)}
    keys = [cell.strip("`") for cell in table_first_cells(section(VOCABULARY, "## Attributes, metrics and resource keys"))]
    assert sorted(set(keys) - names) == [] and len(keys) == len(set(keys))
    spans = {}
    for line in section(VOCABULARY, "## Span names").splitlines():
        cells = line.split(" | ")
        if len(cells) == 4 and cells[1].startswith("`"):
            spans[cells[1].strip("`")] = tuple(group.strip() for group in cells[2].split(","))
    assert set(spans) == set(rl.SPAN_GROUPS)
    assert {name: set(groups) for name, groups in spans.items()} == {
        name: set(groups) for name, groups in rl.SPAN_GROUPS.items()}
