"""The judges of a panel behind one protocol, built from config through a registry of kinds.

LLM judges import litellm only when one is built.
"""

from __future__ import annotations

from consensus_eval.judges.base import CallOutcome, Judge
from consensus_eval.judges.registry import build_judge, register_judge

__all__ = ["CallOutcome", "Judge", "build_judge", "register_judge"]
