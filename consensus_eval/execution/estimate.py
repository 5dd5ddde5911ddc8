"""`score --dry-run`: count every planned call's prompt tokens as sent, estimate each judge's cost,
and measure how much of each request a provider's prompt cache can serve.

Nothing is sent. A judge that can show its request as sent (:class:`WireJudge`: the LLM judge gives
the messages with instructor's response schema, ``tools`` or ``response_format``, built by
instructor itself) is counted on that request; any other judge on its messages. Output tokens are
unknown before a call, so two figures are given: an estimate with ``assumed_output_tokens`` per
call, and an upper bound with each judge's ``max_tokens``.

Shared prefix. Providers cache the longest prefix of a request they have seen before (OpenAI from
1,024 tokens, DeepSeek in blocks of 64, Anthropic and DashScope up to a ``cache_control`` marker),
in the order ``tools``, ``response_format``, then the messages. :func:`shared_prefix` is that prefix
for a set of requests; the dry run reports, per judge, the share of prompt tokens in it across the
cases of each dimension (what every call after a dimension's first can be served from the cache),
across the dimensions of one case, and across every call.

One request per case (``call: per_case``). Such a judge's calls of one (case, run) are answered by one
request (:mod:`consensus_eval.judges.per_case`): it is counted once, under the dimension ``per_case``, and
``calls`` counts the requests; the output estimate stays ``assumed_output_tokens`` per dimension answered
(the reply carries every dimension), the upper bound ``max_tokens`` per request.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import LLMJudgeConfig
from consensus_eval.execution.plan import Call, distinct, whole_case
from consensus_eval.execution.pricing import saving_per_cached_token
from consensus_eval.judges.base import Judge

ASSUMED_OUTPUT_TOKENS = 800
#: cases whose requests are built exactly as instructor would send them (the rest: messages + overhead)
SAMPLE_CASES = 8

#: the dimension label of a whole-case request (``call: per_case``) in the estimate's shares
PER_CASE = "per_case"

#: a chat request body as sent: ``messages`` and, by instructor mode, ``tools`` or ``response_format``
Request = dict[str, Any]


@runtime_checkable
class WireJudge(Protocol):
    """A judge that can show the request it would send for a call, and count its tokens."""

    def request(self, messages: list[dict[str, str]], dimension_id: str, case: Case | None = None) -> Request:
        """The request body of one call (messages, tools, response_format), as it would be sent."""
        ...

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        """Prompt tokens of the messages alone."""
        ...

    def count_request(self, request: Request) -> int:
        """Prompt tokens of a request body with the judge's tokenizer."""
        ...


@dataclass
class JudgeEstimate:
    """Projected calls, tokens and cost of one judge (cost None when the model has no known price).

    ``calls`` counts the requests sent (one per case and run for a ``call: per_case`` judge, whose
    ``prefix_share`` is keyed ``per_case``). ``prompt_tokens`` counts what is sent (messages plus the
    response schema the judge's mode adds).
    The prefix shares are fractions (0-1) of a call's prompt tokens that lie in a prefix shared with
    other calls, None where not measured (fewer than two calls to compare, or a judge that sends no
    prompt): ``prefix_share`` per dimension, across its cases (mean over the dimension's calls);
    ``case_prefix_share`` across the dimensions of one case (mean over cases);
    ``all_prefix_share`` across every call of the judge.

    ``cached_tokens`` is what a prompt cache can serve at best: every call after a dimension's first
    served its dimension's shared prefix (the provider's minimum prefix and block size, calls in flight
    together and cache expiry make it less); ``cached_cost`` is ``cost`` with those tokens billed at the
    cache rate (:func:`~consensus_eval.execution.pricing.saving_per_cached_token`; None when unknown).
    """

    judge: str
    model: str
    calls: int
    prompt_tokens: int
    output_tokens: int
    max_output_tokens: int
    cost: float | None
    max_cost: float | None
    prefix_share: dict[str, float | None] = field(default_factory=dict)
    case_prefix_share: float | None = None
    all_prefix_share: float | None = None
    cached_tokens: int = 0
    cached_cost: float | None = None
    #: ``batch: true`` judges: the factor their costs above are priced at (the config's
    #: ``batch_cost_factor`` x the live price); None for a judge answering live
    batch_factor: float | None = None
    #: with adaptive runs or a cascade, these figures are the least the run makes (its first round:
    #: ``adaptive.min_runs`` runs, stage-2 judges not asked) and ``upper`` the most (``adaptive.max_runs``
    #: runs, stage-2 judges asked every case); None for a fixed plan (the figures are exact)
    upper: JudgeEstimate | None = None


def estimate(calls: Sequence[Call], judges: Sequence[Judge],
             assumed_output_tokens: int = ASSUMED_OUTPUT_TOKENS) -> list[JudgeEstimate]:
    """Every judge's tokens, cost and shared-prefix shares over the planned calls (a judge that sends
    nothing costs 0; a request that cases with the same content share is sent, and counted, once)."""
    by_judge: dict[str, list[Call]] = defaultdict(list)
    for c in distinct(calls):
        by_judge[c.planned.judge].append(c)
    out = []
    for judge in judges:
        cfg = judge.config
        mine = by_judge.get(cfg.name, [])
        if not judge.reads_prompt:
            out.append(JudgeEstimate(cfg.name, cfg.kind, len(mine), 0, 0, 0, 0.0, 0.0, cached_cost=0.0))
            continue
        llm = cfg if isinstance(cfg, LLMJudgeConfig) else None
        max_tokens = llm.max_tokens if llm is not None else assumed_output_tokens
        out_tokens = assumed_output_tokens * len(mine)  # per dimension answered, whatever the requests
        if whole_case(judge):
            mine = one_per_case(mine)
        max_out = max_tokens * len(mine)
        p = judge.prices()
        saving = saving_per_cached_token(cfg)
        factor: float | None = None
        if llm is not None and llm.batch:  # batch: true: every token at the provider's batch price
            factor = float(llm.batch_cost_factor)
            p = (p[0] * factor, p[1] * factor) if p else None
            saving = saving * factor if saving is not None else None
        if isinstance(judge, WireJudge):
            prompt_tokens, shares = _wire_counts(judge, mine)
        else:
            prompt_tokens, shares = _message_counts(judge, mine), _Shares()
        cost = (prompt_tokens * p[0] + out_tokens * p[1]) if p else None
        out.append(JudgeEstimate(
            cfg.name, llm.model if llm is not None else cfg.kind, len(mine), prompt_tokens, out_tokens, max_out,
            cost=cost, max_cost=(prompt_tokens * p[0] + max_out * p[1]) if p else None,
            prefix_share=shares.by_dimension, case_prefix_share=shares.across_dimensions,
            all_prefix_share=shares.across_all, cached_tokens=shares.cacheable_tokens,
            cached_cost=None if cost is None or saving is None else cost - shares.cacheable_tokens * saving,
            batch_factor=factor,
        ))
    return out


@dataclass
class ShownRequest:
    """What one judge would send for one call (``score --dry-run --show-prompt``): ``request`` is the body as
    sent, messages with the tool or schema instructor adds in the judge's mode (:meth:`WireJudge.request`), or
    the messages alone for a judge that cannot show more; None for a judge that reads the case itself and sends
    no prompt (rules, simulated). ``dimension`` is :data:`PER_CASE` for a judge asking every dimension at once."""

    judge: str
    dimension: str
    request: Request | None


def shown_requests(calls: Sequence[Call], judges: Sequence[Judge], case_id: str,
                   dimension: str | None = None) -> list[ShownRequest]:
    """The first run's request of each judge for case ``case_id`` (every dimension, or ``dimension`` only), in
    judge then plan order; nothing is sent."""
    out = []
    for judge in judges:
        mine = [c for c in calls if c.planned.judge == judge.config.name and c.planned.case_id == case_id
                and (dimension is None or c.planned.dimension == dimension)]
        first = min((c.planned.run for c in mine), default=0)
        mine = [c for c in mine if c.planned.run == first]
        whole = judge.reads_prompt and whole_case(judge)
        for c in mine[:1] if whole else mine:   # a per_case judge's one request carries every dimension
            label = PER_CASE if whole else c.planned.dimension
            if not judge.reads_prompt:
                out.append(ShownRequest(judge.config.name, label, None))
            elif isinstance(judge, WireJudge):
                out.append(ShownRequest(judge.config.name, label,
                                        judge.request(c.messages, c.planned.dimension, c.case)))
            else:
                out.append(ShownRequest(judge.config.name, label, {"messages": c.messages}))
    return out


def one_per_case(calls: Sequence[Call]) -> list[Call]:
    """The requests a ``call: per_case`` judge sends for ``calls``: the first call of each (case, run),
    relabelled :data:`PER_CASE` (its messages are the whole-case prompt every dimension's call carries)."""
    seen: set[tuple[str, int]] = set()
    out = []
    for c in calls:
        key = (c.planned.case_id, c.planned.run)
        if key not in seen:
            seen.add(key)
            out.append(replace(c, planned=replace(c.planned, dimension=PER_CASE)))
    return out


def _message_counts(judge: Judge, calls: list[Call]) -> int:
    counted: dict[int, int] = {}  # calls of one case and dimension share their messages
    total = 0
    for c in calls:
        key = id(c.messages)
        if key not in counted:
            counted[key] = judge.count_tokens(c.messages)
        total += counted[key]
    return total


@dataclass
class _Shares:
    by_dimension: dict[str, float | None] = field(default_factory=dict)
    across_dimensions: float | None = None
    across_all: float | None = None
    cacheable_tokens: int = 0


def _wire_counts(judge: WireJudge, calls: list[Call]) -> tuple[int, _Shares]:
    """Prompt tokens of every call as sent, and the shared-prefix shares (see :class:`JudgeEstimate`).

    Building a request as instructor does costs about 10 ms (its schema is regenerated each time), so
    the requests of the first :data:`SAMPLE_CASES` cases are built and counted exactly; the others are
    counted as their messages plus the mean schema overhead of their dimension in that sample (what the
    mode adds does not depend on the case), and the shares are measured on the sample.
    """
    requests: dict[tuple[int, str], tuple[Request, int]] = {}  # the runs of a case share one request
    by_dim: dict[str, list[tuple[Request, int]]] = defaultdict(list)
    calls_per_dim: dict[str, int] = defaultdict(int)
    by_case: dict[str, list[tuple[Request, int]]] = defaultdict(list)
    overhead: dict[str, list[int]] = defaultdict(list)  # tokens the mode adds to the messages, per dimension
    counted: dict[tuple[int, str], int] = {}
    sizes: dict[str, list[int]] = defaultdict(list)  # every distinct request's tokens, per dimension
    total = 0
    for c in calls:
        dim = c.planned.dimension
        key = (id(c.messages), dim)
        if key not in counted:
            sampled = c.planned.case_id in by_case or len(by_case) < SAMPLE_CASES
            if sampled or not overhead[dim]:
                req = judge.request(c.messages, dim, c.case)
                requests[key] = (req, judge.count_request(req))
                by_dim[dim].append(requests[key])
                by_case[c.planned.case_id].append(requests[key])
                counted[key] = requests[key][1]
                overhead[dim].append(counted[key] - judge.count_tokens(c.messages))
            else:
                counted[key] = judge.count_tokens(c.messages) + round(sum(overhead[dim]) / len(overhead[dim]))
            sizes[dim].append(counted[key])
        total += counted[key]
        calls_per_dim[dim] += 1

    def prefix_tokens(group: list[tuple[Request, int]]) -> int:
        prefix = shared_prefix([r for r, _ in group])
        return judge.count_request(prefix) if prefix.get("messages") or prefix.get("tools") else 0

    def share(group: list[tuple[Request, int]], n: int | None = None, mean: float | None = None) -> float | None:
        if len(group) < 2:
            return None
        n = prefix_tokens(group) if n is None else n
        return min(1.0, n / (mean or sum(t for _, t in group) / len(group)))

    shares = _Shares()
    for d, g in by_dim.items():
        n = prefix_tokens(g) if len(g) > 1 else 0
        shares.by_dimension[d] = share(g, n, sum(sizes[d]) / len(sizes[d]))
        shares.cacheable_tokens += n * (calls_per_dim[d] - 1)
    per_case = [s for s in (share(g) for g in by_case.values()) if s is not None]
    shares.across_dimensions = sum(per_case) / len(per_case) if per_case else None
    shares.across_all = share(list(requests.values()))
    return total, shares


def shared_prefix(requests: Sequence[Request]) -> Request:
    """The longest prefix every request shares, as a request (for counting its tokens).

    Compared in the order providers cache a request: ``tools``, then ``response_format`` (each
    shared whole or not at all: a schema that differs differs from its first fields, the model's
    name), then the messages in order, the first differing message cut to the text all share
    (same role, text content). An empty request when the first part already differs.
    """
    if not requests:
        return {"messages": []}
    first = requests[0]
    prefix: Request = {"messages": []}
    for part in ("tools", "response_format"):
        value = first.get(part)
        if any(_dumps(r.get(part)) != _dumps(value) for r in requests[1:]):
            return prefix
        if value is not None:
            prefix[part] = value
    shared: list[dict[str, Any]] = []
    for i, m in enumerate(first.get("messages", [])):
        others = [r.get("messages", [])[i] if i < len(r.get("messages", [])) else None for r in requests[1:]]
        if all(o == m for o in others):
            shared.append(m)
            continue
        text = m.get("content")
        if isinstance(text, str) and all(o is not None and o.get("role") == m.get("role")
                                         and isinstance(o.get("content"), str) for o in others):
            common = _common_start([text, *(str(o["content"]) for o in others if o is not None)])
            if common:
                shared.append({"role": m["role"], "content": common})
        break
    prefix["messages"] = shared
    return prefix


def _common_start(texts: list[str]) -> str:
    """The longest string every text starts with."""
    first, n = texts[0], min(len(t) for t in texts)
    for i in range(n):
        c = first[i]
        if any(t[i] != c for t in texts[1:]):
            return first[:i]
    return first[:n]


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
