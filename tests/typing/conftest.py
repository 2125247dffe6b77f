"""The type-checker runs of this folder are `slow` (mypy, pyright, stubtest: 1-1.5 min each on a
loaded 2-core machine): the README's test command leaves them out; .ci/run runs them with
`-m slow` and again in its typing step."""

import pytest

# Tests that start a type checker (the stub test under its name before and after the native wing).
TYPE_CHECKER_RUNS = frozenset({
    "test_a_copy_of_the_fallbacks_checks_clean_in_a_strictly_typed_library",
    "test_the_gate_stub_matches_the_compiled_module",
    "test_the_compiled_modules_match_their_stubs",
    "test_the_user_program_type_checks_clean_under_pyright_strict",
    "test_the_user_program_type_checks_clean_under_mypy_strict",
    "test_mypy_catches_every_mistake_and_nothing_else",
    "test_pyright_catches_every_mistake_and_nothing_else",
})


def pytest_collection_modifyitems(config, items):
    """Mark this folder's type-checker runs slow."""
    import os

    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here + os.sep) and item.originalname in TYPE_CHECKER_RUNS:
            item.add_marker(pytest.mark.slow)
