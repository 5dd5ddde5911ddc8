"""The deterministic ``rules`` judge and the rules it runs, registered per rubric.

- :class:`RulesJudge` (``judge.py``): the judge behind the :class:`~consensus_eval.judges.base.Judge`
  protocol; it runs the rules registered for its rubric.
- :class:`RubricRules`, :func:`register_rules`, :func:`rules_for` (``registry.py``): which rules
  check which rubric (by rubric id); plugins add theirs through the ``consensus_eval.rules``
  entry-point group.
- ``medical_record/``: the built-in rules of the ``medical_record`` rubric, registered when this
  package is imported; :func:`check_case`, :func:`require_compatible`, :data:`RULES_VERSION` and
  :data:`EMITS` are theirs, re-exported here.
"""

from __future__ import annotations

from consensus_eval.judges.rules.judge import RulesJudge
from consensus_eval.judges.rules.medical_record import EMITS, RULES_VERSION, check_case, require_compatible
from consensus_eval.judges.rules.rubric_rules import RubricRules, register_rules, rules_for

__all__ = ["EMITS", "RULES_VERSION", "RubricRules", "RulesJudge", "check_case", "register_rules",
           "require_compatible", "rules_for"]
