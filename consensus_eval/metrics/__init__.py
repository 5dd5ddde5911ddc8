"""Deterministic task metrics (Text2DT decision trees, TCM), importable without any judge stack."""
