"""docs/reliability.md names, for each guarantee, tests that exist: every `tests/...py::name` is a test function
of that file, and every bare `tests/...py` a file of tests."""

import ast
import re

from doc_pages import REPO

PAGE = REPO / "docs" / "reliability.md"


def _tests_of(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")}


def test_every_test_the_reliability_page_names_exists():
    text = PAGE.read_text(encoding="utf-8")
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)
    assert len(named) >= 30
    missing = []
    for file, name in named:
        path = REPO / file
        if not path.is_file():
            missing.append(file)
        elif name and name not in _tests_of(path):
            missing.append(f"{file}::{name}")
        elif not name and not _tests_of(path):
            missing.append(f"{file} (no tests)")
    assert missing == []


def test_every_fault_row_names_the_test_that_holds_it():
    section = PAGE.read_text(encoding="utf-8").split("## Faults", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith(("| ---", "| fault"))]
    assert rows and all(re.search(r"`tests/[\w/]+\.py::\w+`", row.rsplit(" | ", 1)[1]) for row in rows)
