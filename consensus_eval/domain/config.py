"""Evaluation config: the rubric, the runs, the consensus rules and the judge panel (YAML).

Judges are configured, not coded. A judge's API key is never in the config: ``api_key_env`` names
the environment variable that holds it, read only when a call is made.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from consensus_eval._errors import InputError, UnknownName, UsageError, format_validation_error
from consensus_eval._resources import resolve
from consensus_eval.domain.aggregate import aggregator
from consensus_eval.domain.cases import CaseFields
from consensus_eval.domain.fewshot import FewShot, FewShotExample
from consensus_eval.domain.plugins import Registry
from consensus_eval.domain.sets import duplicates
from consensus_eval.domain.textio import load_yaml, read_text

Mode = Literal["tools", "json", "json_schema", "md_json"]
#: whether an LLM judge sends prompt-cache markers (:attr:`LLMJudgeConfig.prompt_cache`)
PromptCache = Literal["auto", "on", "off"]

#: providers (the litellm prefix of ``model``) that cache a prompt prefix only where the request marks
#: it (``cache_control``), and for which litellm injects the marker: ``prompt_cache: auto`` sends it
#: to these only. OpenAI, DeepSeek and xAI cache by themselves (no marker); others may ignore it.
MARKER_PROVIDERS = frozenset({"anthropic", "dashscope", "bedrock", "vertex_ai", "azure_ai", "openrouter",
                              "databricks", "minimax", "zai"})

#: the price of a cached input token as a fraction of the input price, by provider, for judges priced
#: from the config without ``cached_input_cost_per_token`` (each provider's published pricing):
#: DeepSeek bills a cache hit at 1/10 of a miss; Anthropic a cache read at 0.1x the input price;
#: DashScope (Qwen) an explicit cache hit (with markers) at 10% and an implicit one at 20%. Other
#: providers (OpenAI's discount differs per model) have no default: cached tokens are billed at the
#: full input price unless the config says otherwise.
CACHED_INPUT_FRACTION = {"deepseek": 0.1, "anthropic": 0.1, "dashscope": 0.1}
#: providers (the litellm prefix of ``model``) whose batch API ``batch: true`` uses (litellm's files and
#: batches API, OpenAI's JSONL format)
BATCH_PROVIDERS = frozenset({"openai"})
#: how an LLM judge asks (:attr:`LLMJudgeConfig.call`): one call per dimension, or one per case
Call = Literal["per_dimension", "per_case"]
#: what a deduction whose evidence is not found in the case does (:class:`EvalConfig`; docs/judges.md,
#: "Grounded evidence")
Ungrounded = Literal["keep", "flag", "drop", "reask"]

# Strings that look like a provider key (OpenAI/DeepSeek "sk-...", Anthropic "sk-ant-...", Google "AIza...").
_KEY_PATTERN = re.compile(r"\b(sk-[A-Za-z0-9_\-]{16,}|AIza[0-9A-Za-z_\-]{30,})")


def looks_like_key(name: str) -> bool:
    """Whether ``name``, given where the name of an environment variable is expected, looks like an API key
    itself: a provider's key pattern, or a run of 16 characters or more without ``_`` that mixes letters and
    digits (variable names are words joined by ``_``: ``DEEPSEEK_API_KEY``, ``KEY_2024``; keys are not)."""
    if _KEY_PATTERN.search(name):
        return True
    return any(len(part) >= 16 and any(c.isdigit() for c in part) and any(c.isalpha() for c in part)
               for part in name.split("_"))


#: the most runs a judge may make of one dimension of one case (``runs``, ``important_runs``, ``adaptive.max_runs``)
MAX_RUNS = 1000


class JudgeConfig(BaseModel):
    """What every judge of the panel has: a ``name`` and a ``kind``; each kind adds its own fields.

    The built-in kinds are ``llm`` (:class:`LLMJudgeConfig`) and ``rules``
    (:class:`RulesJudgeConfig`); a plugin adds a kind with
    :func:`consensus_eval.judges.register_judge`. Validating a ``JudgeConfig`` from a mapping picks
    the class registered for its ``kind`` (a union discriminated on ``kind``); without ``kind``, a
    judge named ``rules`` with no ``model`` is the rules judge and anything else an LLM judge.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]+$")]
    kind: str
    #: how many of the judge's calls run at once: a number, or ``auto`` (LLM judges: sized from the
    #: rate limits and the observed latency, cut on 429s: :mod:`consensus_eval.judges.pacing`; a kind
    #: without adaptive pacing runs :attr:`max_workers` at once)
    concurrency: Annotated[int, Field(gt=0)] | Literal["auto"] = 8
    #: the judge's stage in a cascade: ``1`` (asked every case) or ``2`` (asked only the cases the
    #: stage-1 judges flag or cannot settle: :mod:`consensus_eval.execution.adaptive`). Not part of the
    #: identity: a stage changes which cases a judge sees, never its answer to one.
    stage: Literal[1, 2] = 1

    #: fields that change the judge's answers, hashed into :attr:`identity` (bump nothing else). The
    #: ``name`` is always part of the identity (added by :attr:`identity` if a kind leaves it out): two
    #: judges of the same model and settings under two names are two judges, each with its own calls.
    IDENTITY_FIELDS: ClassVar[tuple[str, ...]] = ("name", "kind")
    #: identity fields hashed only when not at their default: a judge that leaves them unset keeps the
    #: identity (and every stored request hash) it has without them
    IDENTITY_IF_SET: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="wrap")
    @classmethod
    def _by_kind(cls, data: Any, handler: ModelWrapValidatorHandler[JudgeConfig]) -> JudgeConfig:
        if cls is JudgeConfig and isinstance(data, Mapping):
            kind = data.get("kind") or _infer_kind(data)
            return judge_config_class(kind).model_validate({**data, "kind": kind})
        return handler(data)

    def missing_key(self) -> str | None:
        """A message if this judge needs a secret that is not set, else None."""
        return None

    @property
    def max_workers(self) -> int:
        """The most calls of this judge the runner starts at once: ``concurrency``, 8 for ``auto``."""
        return 8 if self.concurrency == "auto" else self.concurrency

    @cached_property
    def identity(self) -> str:
        """A hash of what determines this judge's answers (:attr:`IDENTITY_FIELDS`).

        Concurrency, rate limits, timeouts, retries and prices do not change answers and are
        left out, so tuning them does not invalidate stored results. The judge's ``name`` is always in
        it: without it, two judges with the same model and settings under different names would share
        request hashes, and the second one's calls would never be made (it would silently vanish).
        """
        fields = dict.fromkeys(("name", *self.IDENTITY_FIELDS))
        values = {k: getattr(self, k) for k in fields}
        for k in self.IDENTITY_IF_SET:  # at their default, as if the field did not exist (hashes kept)
            if values.get(k) == type(self).model_fields[k].default:
                values.pop(k, None)
        blob = json.dumps(values, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class LLMJudgeConfig(JudgeConfig):
    """An LLM judge: ``model`` (a litellm id such as ``deepseek/deepseek-reasoner``,
    ``openai/gpt-4.1``, ``dashscope/qwen-max`` or ``hosted_vllm/<name>``) called through instructor
    in ``mode``. Its key is never in the config: ``api_key_env`` names the environment variable."""

    kind: Literal["llm"] = "llm"
    model: str = ""
    api_base: str | None = None
    api_key_env: str | None = None
    mode: Mode = "tools"
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    max_tokens: Annotated[int, Field(gt=0)] = 4096
    #: ``auto``: as many requests in flight as reach ``rpm``/``tpm`` at the observed latency (Little's
    #: law), at most ``max_concurrency``, cut on 429s and regrown slowly (AIMD); a number fixes it
    concurrency: Annotated[int, Field(gt=0)] | Literal["auto"] = "auto"
    #: the most requests in flight ``concurrency: auto`` may reach
    max_concurrency: Annotated[int, Field(gt=0)] = 256
    #: requests per minute, paced evenly (one every 60/rpm s)
    rpm: Annotated[float, Field(gt=0)] | None = None
    #: tokens per minute (prompt + completion): each request is charged its estimated prompt tokens
    #: before it is sent and corrected by the usage its reply reports
    tpm: Annotated[float, Field(gt=0)] | None = None
    timeout_s: Annotated[float, Field(gt=0)] = 120.0
    max_retries: Annotated[int, Field(ge=0)] = 4
    max_reasks: Annotated[int, Field(ge=0)] = 2
    input_cost_per_token: Annotated[float, Field(ge=0)] | None = None
    output_cost_per_token: Annotated[float, Field(ge=0)] | None = None
    #: USD per input token served from the provider's prompt cache, for a judge priced from the config;
    #: unset: the provider's published fraction of ``input_cost_per_token`` (:data:`CACHED_INPUT_FRACTION`),
    #: else the full input price
    cached_input_cost_per_token: Annotated[float, Field(ge=0)] | None = None
    #: prompt-cache markers (``cache_control`` on the last message shared by the calls, the system
    #: message): ``auto`` sends them to the providers that need them (:data:`MARKER_PROVIDERS`:
    #: Anthropic, DashScope...), ``on`` to any provider, ``off`` never. Providers that cache by
    #: themselves (OpenAI, DeepSeek) need none. Markers change the price, not the answer.
    prompt_cache: PromptCache = "auto"
    extra_body: dict[str, Any] = {}
    #: the largest case (record + conversation, characters) sent to this judge; larger cases are
    #: recorded failed (``record_too_long``) without a call. 200,000 characters of Chinese is beyond
    #: every context window this tool has met; lower it to your model's.
    max_case_chars: Annotated[int, Field(gt=0)] = 200_000
    #: ask once more, in the same conversation, for exact quotes when a reply's evidence is not found
    #: in the case (set for every LLM judge by the run's ``ungrounded: reask``)
    reask_ungrounded: bool = False
    #: send this judge's calls as provider batches (half price, answered within 24 h) instead of one
    #: request each: ``score`` submits them and returns, a later ``score`` (or ``score --wait``) collects
    #: (:mod:`consensus_eval.execution.batch`). Not part of the identity: a batch answer is the same request,
    #: so stored results are reused whether batch is on or off. Providers: :data:`BATCH_PROVIDERS`.
    batch: bool = False
    #: seconds between two looks at the provider's batches under ``score --wait``
    batch_poll_s: Annotated[float, Field(gt=0)] = 30.0
    #: what a batch call costs as a fraction of the same call live (every token: input, cached, output);
    #: OpenAI bills batches at half price, 0.5
    batch_cost_factor: Annotated[float, Field(ge=0, le=1)] = 0.5
    #: ``per_dimension`` (the default): one call per dimension of a case; ``per_case``: the dimensions of
    #: a case (and run) asked in one call (``<rubric>/per_case.j2``, a reply with one part per dimension),
    #: the case sent once. Stored, resumed and reported per dimension, as with ``per_dimension``; each
    #: dimension's record carries its share of the call's tokens and cost
    #: (:mod:`consensus_eval.judges.per_case`). Part of the identity: it changes what is asked. Measure
    #: before you use it (docs/judges.md, "One call per case").
    call: Call = "per_dimension"

    IDENTITY_FIELDS: ClassVar[tuple[str, ...]] = (
        "name", "kind", "model", "api_base", "mode", "temperature", "max_tokens", "extra_body", "call")
    IDENTITY_IF_SET: ClassVar[tuple[str, ...]] = ("call",)

    @field_validator("extra_body")
    @classmethod
    def _no_credentials(cls, v: dict[str, Any]) -> dict[str, Any]:
        found = _credential_key(v, "extra_body")
        if found:
            raise ValueError(f"{found} looks like a credential; a secret does not belong in the config: put the "
                             "key in an environment variable and name it with `api_key_env: VAR_NAME` "
                             "(it is sent as the provider expects)")
        return v

    @model_validator(mode="after")
    def _check(self) -> LLMJudgeConfig:
        if not self.model:
            raise ValueError("an llm judge needs `model` (a litellm model id such as openai/gpt-4.1)")
        if self.api_key_env is not None and (not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env)
                                             or looks_like_key(self.api_key_env)):
            # never echoed: a key pasted here would be shown (and stored with the config)
            raise ValueError("api_key_env must be the NAME of an environment variable (e.g. DEEPSEEK_API_KEY), "
                             "not the key itself (what is there looks like a key: it is not shown)")
        if self.batch and self.provider not in BATCH_PROVIDERS:
            raise ValueError(f"batch: true needs a provider with an OpenAI-style batch API reachable through litellm "
                             f"({', '.join(sorted(BATCH_PROVIDERS))}: `openai/<model>`, with `api_base` for another "
                             f"OpenAI-compatible endpoint); {self.provider!r} has none: set batch: false")
        if self.batch and self.call == "per_case":
            raise ValueError("batch: true and call: per_case cannot be combined yet; choose one")
        return self

    @property
    def max_workers(self) -> int:
        """``concurrency``, or ``max_concurrency`` for ``auto`` (the judge's pacing admits fewer)."""
        return self.max_concurrency if self.concurrency == "auto" else self.concurrency

    def api_key(self) -> str | None:
        """The key from the environment, or None when the judge needs none (``api_key_env`` unset)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def missing_key(self) -> str | None:
        if self.api_key_env and not os.environ.get(self.api_key_env):
            return (f"judge {self.name!r}: environment variable {self.api_key_env} is not set; "
                    f"export {self.api_key_env}=<your key> or remove the judge from the config")
        return None

    @property
    def config_prices(self) -> tuple[float, float] | None:
        """(input, output) USD per token when the config gives both prices, else None."""
        if self.input_cost_per_token is None or self.output_cost_per_token is None:
            return None
        return self.input_cost_per_token, self.output_cost_per_token

    @property
    def provider(self) -> str:
        """The litellm provider prefix of ``model`` (``deepseek`` of ``deepseek/deepseek-reasoner``)."""
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"

    @property
    def cache_markers(self) -> bool:
        """Whether this judge's requests carry prompt-cache markers (:attr:`prompt_cache`)."""
        if self.prompt_cache == "auto":
            return self.provider in MARKER_PROVIDERS
        return self.prompt_cache == "on"

    @property
    def cached_input_price(self) -> float | None:
        """USD per cached input token for a judge priced from the config: ``cached_input_cost_per_token``,
        else the provider's fraction of the input price (:data:`CACHED_INPUT_FRACTION`), else the input
        price itself (no discount known). None when the config gives no input price."""
        if self.cached_input_cost_per_token is not None:
            return self.cached_input_cost_per_token
        if self.input_cost_per_token is None:
            return None
        fraction = CACHED_INPUT_FRACTION.get(self.provider)
        if self.provider == "dashscope" and not self.cache_markers:
            fraction = 0.2  # DashScope's implicit cache (no marker) bills a hit at 20%
        return self.input_cost_per_token * (fraction if fraction is not None else 1.0)


class RulesJudgeConfig(JudgeConfig):
    """The built-in deterministic judge of a rubric that has rules registered (``medical_record`` has):
    offline, free, no other setting."""

    kind: Literal["rules"] = "rules"

    @model_validator(mode="before")
    @classmethod
    def _no_llm_settings(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            llm_only = [k for k in data if k in LLMJudgeConfig.model_fields and k not in cls.model_fields]
            if llm_only:
                raise ValueError(
                    f"{', '.join(f'`{k}`' for k in llm_only)}: LLM settings on a rules judge (kind: rules); "
                    f"a rules judge takes only {', '.join(cls.model_fields)}; for an LLM judge write kind: llm")
        return data


#: how a simulated judge errs (:class:`SimulatedJudgeConfig`; :mod:`consensus_eval.judges.simulated`)
Persona = Literal["strict", "lenient", "misses_category", "over_calls"]


class SimulatedJudgeConfig(JudgeConfig):
    """A simulated judge (``kind: simulated``): a demo device for trying the tool offline, never a real judgment.
    It reads the case with plain text rules and answers as its seeded ``persona`` would
    (:mod:`consensus_eval.judges.simulated`): ``strict``, ``lenient``, ``misses_category`` (never sees one
    category) or ``over_calls`` (false alarms). Offline, free, no key; every output labels it simulated."""

    kind: Literal["simulated"] = "simulated"
    persona: Persona = "strict"
    #: the seed of the persona's random slips (the same seed, case and run: the same answer)
    seed: int = 0

    IDENTITY_FIELDS: ClassVar[tuple[str, ...]] = ("name", "kind", "persona", "seed")


#: header and field names that carry a secret (case-insensitive), refused anywhere in ``extra_body``:
#: any name containing one of these (``token`` but not ``max_tokens``, ``budget_tokens``, ``tokenizer``,
#: ``token_ids``), and ``cookie``
_CREDENTIAL_PART = re.compile(r"authori[sz]ation|api[-_ ]?key|secret|password|passwd|token(?!s|iz|_?ids?(?![a-z]))",
                              re.IGNORECASE)
_CREDENTIAL_NAMES = {"cookie", "set-cookie"}


def _credential_key(value: Any, path: str) -> str | None:
    """The path of the first key under ``value`` (nested mappings and lists) that names a credential."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            key = str(k)
            here = f"{path}.{key}"
            if key.strip().lower() in _CREDENTIAL_NAMES or _CREDENTIAL_PART.search(key):
                return here
            found = _credential_key(v, here)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _credential_key(v, f"{path}[{i}]")
            if found:
                return found
    return None


def _infer_kind(data: Mapping[str, Any]) -> str:
    return "rules" if data.get("name") == "rules" and "model" not in data else "llm"


#: entry-point group through which installed packages add judge kinds (see judges.registry)
JUDGE_ENTRY_POINTS = "consensus_eval.judges"


def _unknown_kind(kind: str, known: list[str]) -> ValueError:
    return ValueError(f"unknown judge kind {kind!r}; known kinds: {', '.join(known)} "
                      f"(an installed plugin can add more: entry-point group {JUDGE_ENTRY_POINTS})")


_JUDGE_KINDS: Registry[type[JudgeConfig]] = Registry("judge kind", JUDGE_ENTRY_POINTS, _unknown_kind)


def register_judge_config(cls: type[JudgeConfig]) -> str:
    """Make ``kind: <cls's kind>`` valid in configs, and return the kind (the default of ``cls.kind``)."""
    kind = cls.model_fields["kind"].default
    if not isinstance(kind, str) or not kind:
        raise UsageError(f"{cls.__name__}.kind needs a default naming the kind, e.g. kind: Literal['mine'] = 'mine'")
    _JUDGE_KINDS.register(kind, cls)
    return kind


def judge_config_class(kind: str) -> type[JudgeConfig]:
    """The config class of ``kind`` (plugins are loaded on the first unknown kind)."""
    return _JUDGE_KINDS.get(kind)


register_judge_config(LLMJudgeConfig)
register_judge_config(RulesJudgeConfig)
register_judge_config(SimulatedJudgeConfig)


class ConsensusConfig(BaseModel):
    """How runs and judges combine, and when a case is flagged for audit."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    #: how judges' scores combine: a registered aggregator (:mod:`consensus_eval.domain.aggregate`)
    aggregate: str = "mean"
    trim: Annotated[float, Field(ge=0, lt=0.5)] = 0.2
    min_judges: Annotated[int, Field(ge=1)] = 1
    #: flag a case when the judges' totals are more than this many points apart; unset (the default): more than
    #: ``flag_spread_share`` of the range of the rubric's total (:func:`~consensus_eval.domain.flags.spread_limit`)
    flag_spread: Annotated[float | None, Field(ge=0, exclude_if=lambda v: v is None)] = None
    #: the share of the rubric total's range the judges' totals may differ by before a case is flagged (unless
    #: ``flag_spread`` gives points): 0.1 is 10 points of the medical_record rubric's 0-100, 3.6 of PDQI-9's 9-45,
    #: 0.1 of a criteria rubric's 0-1 (left out of dumps at its default)
    flag_spread_share: Annotated[float, Field(gt=0, le=1, exclude_if=lambda v: v == 0.1)] = 0.1
    flag_star_gap: Annotated[int, Field(ge=1)] = 2
    #: flag a case when the judges disagree on at least this share of a ``criteria`` dimension's criteria (and on
    #: one at least: the default 0 flags any criterion they disagree on; left out of dumps at its default)
    flag_split_share: Annotated[float, Field(ge=0, le=1, exclude_if=lambda v: v == 0)] = 0.0
    #: flag a case when judges' ratings of a ``likert`` dimension differ by this many levels or more (left out
    #: of dumps at its default: a config that does not set it is stored as one without the field)
    flag_level_gap: Annotated[float, Field(gt=0, exclude_if=lambda v: v == 2)] = 2

    @field_validator("aggregate")
    @classmethod
    def _known_aggregator(cls, v: str) -> str:
        aggregator(v)  # raises ValueError naming the known ones
        return v


#: how many runs a case gets per judge: a number, or ``adaptive`` (:class:`AdaptiveConfig`)
Runs = int | Literal["adaptive"]


class AdaptiveConfig(BaseModel):
    """The stopping rule of ``runs: adaptive`` / ``important_runs: adaptive``
    (:mod:`consensus_eval.execution.adaptive`; docs/judges.md, "Adaptive runs and cascades").

    A case starts with ``min_runs`` runs per judge; a judge then gets one more run of a dimension of the
    case only while (a) its own runs of that dimension disagree: their re-derived scores are more than
    ``run_spread`` points apart (max - min), or their stars are ``run_star_gap`` or more apart; or (b) the
    panel disagrees on the case: the judges' totals are more than ``consensus.flag_spread`` apart (every
    dimension gets a run) or the dimension's stars ``consensus.flag_star_gap`` or more apart. It stops at
    ``max_runs`` runs, and a judge none of whose runs succeeded gets no more (a failure is not a disagreement).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    #: runs every adaptive case gets from each judge before any decision
    min_runs: Annotated[int, Field(ge=1, le=MAX_RUNS)] = 1
    #: the most runs a judge makes of one dimension of one case
    max_runs: Annotated[int, Field(ge=1, le=MAX_RUNS)] = 3
    #: points: a judge's runs of a dimension more than this apart (max - min) get another run
    run_spread: Annotated[float, Field(ge=0)] = 5.0
    #: stars: a judge's runs of a dimension this many stars or more apart get another run (None: not used)
    run_star_gap: Annotated[int, Field(ge=1)] | None = 1

    @model_validator(mode="after")
    def _ordered(self) -> AdaptiveConfig:
        if self.min_runs > self.max_runs:
            raise ValueError(f"adaptive.min_runs ({self.min_runs}) is above adaptive.max_runs ({self.max_runs})")
        return self


class EvalConfig(BaseModel):
    """A whole evaluation: rubric, prompts, runs, consensus rules and the panel of judges."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    rubric: str = "medical_record"
    prompts_dir: str | None = None
    #: runs per judge of a case (``important_runs`` of an important one): a number, or ``adaptive``
    #: (between ``adaptive.min_runs`` and ``adaptive.max_runs``, by :class:`AdaptiveConfig`'s rule)
    runs: Runs = 1
    important_runs: Runs = 3
    adaptive: AdaptiveConfig = AdaptiveConfig()
    consensus: ConsensusConfig = ConsensusConfig()
    judges: list[SerializeAsAny[JudgeConfig]] = Field(min_length=1)
    #: deductions whose evidence is not found in the case (grounding): ``keep`` (shown, not flagged),
    #: ``flag`` (kept in the score, flagged), ``drop`` (scores re-derived without them; the reply stays
    #: stored as given), ``reask`` (LLM judges ask once more for exact quotes; then as ``flag``)
    ungrounded: Ungrounded = "flag"
    #: the columns of a CSV or Excel cases file (:class:`~consensus_eval.domain.cases.CaseFields`;
    #: a JSON Lines file names its fields itself)
    fields: CaseFields = CaseFields()
    #: few-shot examples from clinicians' corrections on a spot check's tuning part (opt-in; docs/rubrics.md,
    #: :mod:`consensus_eval.domain.fewshot`); left out of the stored config when not set
    few_shot: Annotated[FewShot | None, Field(exclude_if=lambda v: v is None)] = None

    def examples(self, dimension: str) -> list[FewShotExample]:
        """The few-shot examples the prompts of ``dimension`` show (none without ``few_shot``)."""
        return list(self.few_shot.examples.get(dimension, [])) if self.few_shot is not None else []

    @field_validator("runs", "important_runs", mode="plain")
    @classmethod
    def _runs(cls, v: Any) -> Runs:
        if v == "adaptive":
            return "adaptive"
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)  # as pydantic's lax int would
        elif isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"Input should be a valid integer (a number of runs, 1 or more) or `adaptive`, got {v!r}")
        if v < 1:
            raise ValueError("Input should be greater than or equal to 1 (or `adaptive`)")
        if v > MAX_RUNS:
            raise ValueError(f"at most {MAX_RUNS} runs per judge of a case, got {v}")
        return v

    @model_validator(mode="after")
    def _reask_ungrounded(self) -> EvalConfig:
        if self.ungrounded == "reask":
            whole = [j.name for j in self.judges if isinstance(j, LLMJudgeConfig) and j.call == "per_case"]
            if whole:
                raise ValueError(f"ungrounded: reask is not supported with call: per_case (judge(s) "
                                 f"{', '.join(whole)}): the re-ask for exact quotes asks one dimension; use "
                                 "ungrounded: flag, or call: per_dimension")
            self.judges = [j.model_copy(update={"reask_ungrounded": True}) if isinstance(j, LLMJudgeConfig) else j
                           for j in self.judges]
        return self

    @model_validator(mode="after")
    def _unique_names(self) -> EvalConfig:
        dup = sorted(duplicates(j.name for j in self.judges))
        if dup:
            raise ValueError(f"duplicate judge name(s): {', '.join(dup)}")
        if self.consensus.min_judges > len(self.judges):
            raise ValueError(f"consensus.min_judges is {self.consensus.min_judges} but the panel has "
                             f"{len(self.judges)} judge(s): every case would be inconclusive; lower "
                             f"min_judges to at most {len(self.judges)} or add judges")
        stage1 = [j for j in self.judges if j.stage == 1]
        if not stage1:
            raise ValueError("every judge is `stage: 2`: a cascade needs at least one stage-1 judge (asked every case)")
        if self.cascade and self.consensus.min_judges > len(stage1):
            raise ValueError(f"consensus.min_judges is {self.consensus.min_judges} but the cascade has {len(stage1)} "
                             "stage-1 judge(s), the only ones asked every case: every case the stage-2 judges "
                             f"are not asked would be inconclusive; lower min_judges to at most {len(stage1)}")
        return self

    def runs_for(self, important: bool) -> Runs:
        """A case's runs per judge: a number, or ``adaptive``."""
        return self.important_runs if important else self.runs

    @property
    def cascade(self) -> bool:
        """Whether some judge is ``stage: 2`` (asked only the cases stage 1 flags or cannot settle)."""
        return any(j.stage == 2 for j in self.judges)

    @model_validator(mode="after")
    def _batch_fixed_plan(self) -> EvalConfig:
        batched = [j.name for j in self.judges if isinstance(j, LLMJudgeConfig) and j.batch]
        if batched and self.grows:
            raise ValueError(f"batch: true (judge(s) {', '.join(batched)}) needs a fixed plan: adaptive runs and "
                             "cascades decide from results as they land; use fixed runs or batch: false")
        return self

    @property
    def grows(self) -> bool:
        """Whether the plan grows in rounds from stored results (adaptive runs or a cascade)."""
        return self.cascade or "adaptive" in (self.runs, self.important_runs)

    def to_json(self) -> dict[str, Any]:
        """The config as JSON data, each judge with the fields of its kind (no secret is in it)."""
        return self.model_dump(mode="json")

    @property
    def simulated_judges(self) -> list[str]:
        """The names of the panel's simulated judges (``kind: simulated``: a demo device, labelled in every output)."""
        return [j.name for j in self.judges if isinstance(j, SimulatedJudgeConfig)]

    def judge(self, name: str) -> JudgeConfig:
        for j in self.judges:
            if j.name == name:
                return j
        raise UnknownName(name)


DEFAULT_CONFIG = "configs/default.yaml"


def load_config(path: str | Path = DEFAULT_CONFIG) -> EvalConfig:
    """Load a config YAML; bundled configs (``configs/default.yaml``...) are found from anywhere.

    The file is read as UTF-8 (a BOM is allowed) or, if it is not UTF-8, as GB18030 (a config saved by
    Notepad on Chinese Windows); bytes that are neither are refused naming the line and byte
    (:func:`consensus_eval.domain.textio.read_text`). A literal API key anywhere in the file is
    refused: keys belong in environment variables.
    """
    p = resolve(path, "configs")
    if p.is_dir():
        raise InputError(f"{path}: is a folder, not a config file")
    if not p.exists():  # a named pipe (`-c <(...)`) is not a regular file, and is read like one
        raise InputError(f"{path}: config file not found")
    text = read_text(p, what="config", hint="save it as UTF-8")
    for lineno, line in enumerate(text.splitlines(), 1):
        if _KEY_PATTERN.search(line) or re.match(r"\s*-?\s*api_key\s*:", line):
            raise InputError(f"{p}:{lineno}: this looks like a literal API key; put the key in an "
                             "environment variable and name it with `api_key_env: VAR_NAME`")
    try:
        data = load_yaml(text, p)  # duplicate keys, alias bombs and loops refused, naming the line
    except yaml.YAMLError as e:
        raise InputError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{p}: a config must be a mapping with at least `judges`")
    try:
        cfg = EvalConfig.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{p}: invalid config:\n{format_validation_error(e, _named(data))}") from None
    return cfg


def _named(data: dict[str, Any]) -> dict[str, Any]:
    """Give judges an ``id`` (their name) so error paths read ``judges[1 deepseek].mode``."""
    judges = data.get("judges")
    if isinstance(judges, list):
        data = {**data, "judges": [{**j, "id": j.get("name")} if isinstance(j, dict) else j for j in judges]}
    return data
