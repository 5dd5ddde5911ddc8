"""The pydantic model an LLM judge fills: one dimension's (its kind's
:meth:`~consensus_eval.domain.kinds.base.Dimension.reply_model`) or, asked every dimension of a case in one call,
one field per dimension (:func:`case_response_model`). Built from the rubric, cached and bounded: per-case criteria
make one model per distinct set of ids."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field, create_model

from consensus_eval.domain.criterion import Criterion
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.kinds.base import CASE_MODEL_NAME as CASE_MODEL_NAME, Dimension, Reply
from consensus_eval.domain.rubric import Rubric

#: response models by (rubric fingerprint, dimension, what of the case the model depends on): bounded, since
#: per-case criteria make one model per distinct set of ids (the oldest built is dropped first)
_MODELS: OrderedDict[tuple[str, str, tuple[str, ...]], type[Reply]] = OrderedDict()
MAX_CACHED_MODELS = 512


def _cached(cache: OrderedDict[Any, Any], key: Any, build: Callable[[], Any]) -> Any:
    """``cache[key]``, built with ``build()`` when absent; at most :data:`MAX_CACHED_MODELS` entries."""
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = build()
        while len(cache) > MAX_CACHED_MODELS:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return hit


def response_model(rubric: Rubric, dimension_id: str, case_criteria: Sequence[Criterion] | None = None) -> type[Reply]:
    """The pydantic model an LLM judge fills for ``dimension_id`` of ``rubric``: its kind's
    (:meth:`~consensus_eval.domain.kinds.base.Dimension.reply_model`; ``case_criteria``: the case's criteria,
    for a dimension that judges by them, so the model is per case). Cached by (rubric fingerprint, dimension,
    :meth:`~consensus_eval.domain.kinds.base.Dimension.case_key`), bounded."""
    dim = rubric.dimension(dimension_id)
    key = dim.case_key(case_criteria)
    model: type[Reply] = _cached(_MODELS, (rubric.fingerprint, dimension_id, key),
                                 lambda: dim.reply_model(case_criteria))
    return model


class CaseReply(Reply):
    """Common shape of a whole-case reply (``call: per_case``): one field per rubric dimension, each that
    dimension's reply model (:func:`response_model`)."""

    def part(self, dimension: Dimension) -> Reply:
        """The reply to one dimension (validated like a reply of its own)."""
        reply: Reply = getattr(self, dimension.id)
        return reply

    def to_judgment(self, dimension: Dimension) -> Judgment:
        """The judgment of one dimension, from its part of the reply."""
        return self.part(dimension).to_judgment(dimension)


_CASE_MODELS: OrderedDict[tuple[str, tuple[str, ...]], type[CaseReply]] = OrderedDict()


def case_response_model(rubric: Rubric, case_criteria: Sequence[Criterion] | None = None) -> type[CaseReply]:
    """The pydantic model an LLM judge fills when asked every dimension of a case in one call: one
    required field per dimension of ``rubric`` (in rubric order, named by its id), each the dimension's
    own :func:`response_model`, so each part is checked against the rubric exactly as a reply to that
    dimension alone would be. A reply missing a dimension fails validation (and is re-asked).
    ``case_criteria``: the case's criteria, for a dimension that judges by them. Cached (bounded)."""
    key = tuple(i for d in rubric.dimensions for i in d.case_key(case_criteria))

    def build() -> type[CaseReply]:
        fields: dict[str, Any] = {
            d.id: (response_model(rubric, d.id, case_criteria),
                   Field(description=f"the {d.id} dimension ({d.name}, {d.low:g}-{d.max:g})"))
            for d in rubric.dimensions}
        return create_model(CASE_MODEL_NAME, __base__=CaseReply, **fields)

    model: type[CaseReply] = _cached(_CASE_MODELS, (rubric.fingerprint, key), build)
    return model
