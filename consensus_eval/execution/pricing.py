"""What a prompt-cache hit saves: USD per cached input token, per judge, without calling anyone.

A provider bills a prompt token served from its cache at a lower rate (DeepSeek a tenth, Anthropic
0.1x, OpenAI 25-50% depending on the model). The saving of one cached token is the input price
minus the cached-input price:

- a judge priced from its config: ``input_cost_per_token`` minus
  :attr:`~consensus_eval.domain.config.LLMJudgeConfig.cached_input_price` (the config's
  ``cached_input_cost_per_token``, else the provider's published fraction, else no saving);
- a judge priced by litellm: ``input_cost_per_token`` minus ``cache_read_input_token_cost`` from the
  price map litellm ships (``model_prices_and_context_window_backup.json``, the file litellm reads
  with ``LITELLM_LOCAL_MODEL_COST_MAP=True``), read as data: reading a stored run must not import
  litellm (3 s). A model it does not list, or lists without a cache price: unknown (None).
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

from consensus_eval.domain.config import JudgeConfig, LLMJudgeConfig

PRICE_MAP = "model_prices_and_context_window_backup.json"


def saving_per_cached_token(config: JudgeConfig) -> float | None:
    """USD a cache hit saves per prompt token for this judge (0 for a judge that sends no prompt
    tokens is not asked: None for anything that is not an LLM judge); None when unknown."""
    if not isinstance(config, LLMJudgeConfig):
        return None
    if config.config_prices is not None:
        cached = config.cached_input_price
        return None if cached is None else max(0.0, config.config_prices[0] - cached)
    entry = litellm_price(config.model)
    if entry is None:
        return None
    price_in, price_cached = entry.get("input_cost_per_token"), entry.get("cache_read_input_token_cost")
    if not isinstance(price_in, (int, float)) or not isinstance(price_cached, (int, float)):
        return None
    return max(0.0, float(price_in) - float(price_cached))


def litellm_price(model: str) -> dict[str, Any] | None:
    """litellm's bundled price-map entry for ``model`` (as given, else without its provider prefix
    when the entry belongs to that provider: ``openai/gpt-4.1`` is listed as ``gpt-4.1``)."""
    prices = _price_map()
    entry = prices.get(model)
    if entry is None and "/" in model:
        provider, bare = model.split("/", 1)
        candidate = prices.get(bare)
        if isinstance(candidate, dict) and candidate.get("litellm_provider") == provider:
            entry = candidate
    return entry if isinstance(entry, dict) else None


@cache
def _price_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return {}
    for folder in spec.submodule_search_locations:
        path = Path(folder) / PRICE_MAP
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return {}
            return data if isinstance(data, dict) else {}
    return {}
