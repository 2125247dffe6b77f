"""Figures of the fault suite: one JSON line per case (created / delivered / reported lost, time
against the deadline), printed and, when LENS_FAULT_FIGURES names a file, appended to it."""

import json
import os


def record_figure(case: str, **numbers) -> dict:
    """Print ``case`` and its numbers as one JSON line (and append it to $LENS_FAULT_FIGURES)."""
    line = {"case": case, **numbers}
    text = json.dumps(line, sort_keys=False, default=str)
    print(f"FIGURE {text}")
    path = os.environ.get("LENS_FAULT_FIGURES")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return line
