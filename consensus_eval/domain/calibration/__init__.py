"""Calibration: records with planted errors and what a judge should find in them (docs/calibration.md).

``suite``: the suite's models and the JSONL loader of a user suite; ``operators``: one planting
operator per plantable deduction type, and the types no operator plants (``UNPLANTABLE``);
``generator``: the built-in suite, seeded and deterministic, from the clean base cases.
"""
