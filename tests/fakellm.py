"""Fake OpenAI-compatible chat completions for tests: replies in the shapes instructor expects.

``chat_response(request, reply)`` answers a chat-completions request body with ``reply`` (a dict)
as a tool call (when the request offered tools), plain JSON content (``response_format`` set:
JSON mode) or a fenced json block (MD_JSON). ``dimension_of(request)`` tells which rubric dimension
a request is about, from the response model's name that instructor puts in the request.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

DIMENSIONS = ("accuracy", "completeness", "standardization")

# A few valid deductions per dimension (category id, type id, points) to build varied judgments.
CANDIDATES: dict[str, list[tuple[str, str, float]]] = {
    "accuracy": [("numbers", "value_error", 2), ("drugs", "dose_error", 2), ("timeline", "time_error", 2),
                 ("diagnosis", "diagnosis_missing", 2), ("course", "fact_error", 2), ("numbers", "value_missing", 1.5)],
    "completeness": [("chief_complaint", "cc_duration_missing", 3), ("present_illness", "pi_recent_missing", 4),
                     ("family_history", "fh_absent", 4), ("personal_history", "personal_unrecorded", 1),
                     ("past_history", "ph_important_missing", 2.5)],
    "standardization": [("terminology", "colloquial", 1), ("structure", "order_error", 2),
                        ("drug_writing", "dose_unclear", 1), ("time_expression", "time_vague", 1),
                        ("professionalism", "unprofessional", 1)],
}
MAXIMA = {"accuracy": 40, "completeness": 35, "standardization": 25}


def dimension_of(request: dict[str, Any]) -> str:
    """The dimension a judge request is about (from the response model named in the request)."""
    blob = json.dumps(request, ensure_ascii=False)
    for d in DIMENSIONS:
        if f"{d.title()}Judgment" in blob or f"{d.title()}Deduction" in blob:
            return d
    raise ValueError("not a judge request")


def case_of(request: dict[str, Any]) -> str:
    """The case id written in the user message (``【病例 ID】``)."""
    for m in request.get("messages", []):
        content = m.get("content") or ""
        if isinstance(content, str) and "【病例 " in content:
            return content.split("【病例 ", 1)[1].split("】", 1)[0]
    return ""


def make_reply(dimension: str, rng: random.Random, n: int | None = None, honest: bool = True) -> dict[str, Any]:
    """A valid reply with ``n`` (or 0-3 random) deductions; ``honest`` claims the derived score."""
    n = rng.randint(0, 3) if n is None else n
    picks = [rng.choice(CANDIDATES[dimension]) for _ in range(n)]
    deductions = [{"category": c, "type": t, "points": p, "evidence": "原文", "reason": "理由"} for c, t, p in picks]
    score = max(0.0, MAXIMA[dimension] - sum(p for _, _, p in picks))
    return {"deductions": deductions, "fixed_penalties": [], "score": score if honest else MAXIMA[dimension],
            "stars": 3, "comment": "fake"}


#: plausible clinical statements that none of the example cases says (a judge's invented quotes)
INVENTED_QUOTES = ("右侧踝关节扭伤后肿痛2天", "青霉素皮试阳性", "左眼视网膜脱离术后半年", "夜间阵发性呼吸困难",
                   "双侧甲状腺多发结节", "胃镜示慢性浅表性胃炎", "曾行阑尾切除术", "头颅CT未见明显异常",
                   "幼年患麻疹", "长期夜班工作", "海鲜过敏史", "腰椎间盘突出症病史")
INVENTED_MARK = " [invented quote]"
_FENCED = re.compile(r"<<<BEGIN (MEDICAL RECORD|CONVERSATION)[^>]*>>>\n(.*?)\n<<<END ", re.S)


def case_texts(request: dict[str, Any]) -> tuple[str, str]:
    """``(record, conversation)`` as fenced in the request's user message ("" when absent)."""
    found = {"MEDICAL RECORD": "", "CONVERSATION": ""}
    for m in request.get("messages", []):
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, str):
            for label, text in _FENCED.findall(content):
                found[label] = found[label] or text
    return found["MEDICAL RECORD"], found["CONVERSATION"]


_ANY_FENCE = re.compile(r"<<<BEGIN (MEDICAL RECORD|CLINICAL NOTE|CONVERSATION)[^>]*>>>\n(.*?)\n<<<END ", re.S)


def record_texts(request: dict[str, Any]) -> tuple[str, str]:
    """``(record, conversation)`` as :func:`case_texts`, whatever the rubric's prompts call the record (a medical
    record, a clinical note)."""
    found = {"record": "", "conversation": ""}
    for m in request.get("messages", []):
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, str):
            for label, text in _ANY_FENCE.findall(content):
                key = "conversation" if label == "CONVERSATION" else "record"
                found[key] = found[key] or text
    return found["record"], found["conversation"]


def _snippet(rng: random.Random, text: str, low: int = 4, high: int = 16) -> str:
    """A stretch of ``text`` without line breaks, ``low``-``high`` characters long where it can be."""
    lines = [ln for ln in text.splitlines() if len(ln.strip()) >= low] or [text]
    line = rng.choice(lines).strip()
    size = min(len(line), rng.randint(low, high))
    start = rng.randint(0, len(line) - size)
    return line[start:start + size]


_TO_FULL = {c: chr(ord(c) + 0xFEE0) for c in "0123456789.:%/abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}


def quote(rng: random.Random, record: str, conversation: str, p_invented: float) -> tuple[str, bool]:
    """Evidence as an LLM judge writes it, and whether it was invented (``p_invented`` of the time).

    Otherwise a real stretch of the record (or, one time in six, of the conversation), as is (55%),
    in full-width characters or with a blank inserted and punctuation swapped (normalised: 15%), two stretches joined by
    ``……`` (an elision: 15%) or with ``的`` inserted between two characters (a near quote: 15%; only in a
    stretch of 8 characters or more without digits, so that no value is changed; else as is).
    """
    if rng.random() < p_invented or not record.strip():
        return rng.choice(INVENTED_QUOTES), True
    text = conversation if conversation.strip() and rng.random() < 1 / 6 else record
    snippet = _snippet(rng, text)
    u = rng.random()
    if u < 0.55:
        return snippet, False
    if u < 0.70:
        full = "".join(_TO_FULL.get(c, c) for c in snippet)
        if full == snippet:  # no ASCII: a blank inside and half-width punctuation
            mid = len(snippet) // 2
            full = (snippet[:mid] + " " + snippet[mid:]).replace("，", ",").replace("。", ".").replace("、", ",")
        return full, False
    if u < 0.85:
        return snippet + "……" + _snippet(rng, text), False
    cjk = [i for i in range(1, len(snippet)) if _ideograph(snippet[i - 1]) and _ideograph(snippet[i])]
    if len(snippet) >= 8 and cjk and not any(c.isdigit() for c in snippet):
        i = cjk[len(cjk) // 2]
        return snippet[:i] + "的" + snippet[i:], False
    return snippet, False


def _ideograph(c: str) -> bool:
    return "\u4e00" <= c <= "\u9fff"


def chat_response(request: dict[str, Any], reply: dict[str, Any] | str, *, prompt_tokens: int = 1000,
                  completion_tokens: int = 200, cached_tokens: int = 0, reasoning_tokens: int = 0,
                  cache_style: str = "openai") -> dict[str, Any]:
    """An OpenAI chat.completion body answering ``request`` with ``reply`` in the request's mode.

    ``reply`` may be a raw string (to send malformed JSON). ``cached_tokens`` is reported as OpenAI
    does (``usage.prompt_tokens_details.cached_tokens``) or, with ``cache_style="deepseek"``, as
    DeepSeek does (``usage.prompt_cache_hit_tokens`` and ``prompt_cache_miss_tokens`` only).
    """
    text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
    if request.get("tools"):
        name = request["tools"][0]["function"]["name"]
        message = {"role": "assistant", "content": None,
                   "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": text}}]}
    elif request.get("response_format"):
        message = {"role": "assistant", "content": text}
    else:
        message = {"role": "assistant", "content": f"好的，评分如下：\n```json\n{text}\n```"}
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000,
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if request.get("tools") else "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens,
                  **({"prompt_cache_hit_tokens": cached_tokens,
                      "prompt_cache_miss_tokens": prompt_tokens - cached_tokens} if cache_style == "deepseek"
                     else {"prompt_tokens_details": {"cached_tokens": cached_tokens}}),
                  "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}},
    }


# --------------------------------------------------------------------------- rubric kinds (likert, criteria)


def request_schema(request: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema of the response model a request asks for: the tool's parameters (TOOLS), the
    ``response_format``'s schema (JSON_SCHEMA), else the first JSON object with ``properties`` written
    into a message (JSON, MD_JSON: instructor writes the schema into the system message)."""
    if request.get("tools"):
        schema = request["tools"][0]["function"].get("parameters")
        return schema if isinstance(schema, dict) else None
    fmt = request.get("response_format") or {}
    if isinstance(fmt.get("json_schema"), dict) and isinstance(fmt["json_schema"].get("schema"), dict):
        found: dict[str, Any] = fmt["json_schema"]["schema"]
        return found
    decoder = json.JSONDecoder()
    for m in request.get("messages", []):
        content = m.get("content")
        if not isinstance(content, str):
            continue
        for i, ch in enumerate(content):
            if ch == "{" and '"properties"' in content[i:i + 20000]:
                try:
                    obj, _ = decoder.raw_decode(content[i:])
                except ValueError:
                    continue
                if isinstance(obj, dict) and "properties" in obj:
                    return obj
    return None


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return dict(schema.get("$defs", {}).get(ref.rsplit("/", 1)[1], {}))
    return node


def _kind_of(props: dict[str, Any]) -> str | None:
    if "rating" in props:
        return "likert"
    if "verdicts" in props:
        return "criteria"
    if "deductions" in props:
        return "deductions"
    if "verdict" in props and "quote" in props:
        return "passfail"                                 # tests/plugins/passfail_kind.py's reply
    return None


_TYPE_HELP = re.compile(r"(\w+) \((\w+), ([0-9.]+)(?:-([0-9.]+))?\)")
_SCORE_MAX = re.compile(r"0-([0-9.]+)")


def _deductions_reply(schema: dict[str, Any], node: dict[str, Any], rng: random.Random, quality: float,
                      bias: float, evidence: str) -> dict[str, Any]:
    """A valid deductions reply for any rubric, read from its schema: the deduction types and their points
    from the type field's description (``id (category, points)``), the maximum from the score's."""
    props = node["properties"]
    deduction = _resolve(schema, props["deductions"]["items"])
    types = _TYPE_HELP.findall(deduction["properties"]["type"].get("description", ""))
    n = max(0, round((1 - quality) * 3 + bias + rng.gauss(0, 0.6))) if types else 0
    picks = [rng.choice(types) for _ in range(n)]
    score_max = _SCORE_MAX.search(props["score"].get("description", "0-0"))
    assert score_max is not None
    top = float(score_max.group(1))
    return {"deductions": [{"category": c, "type": t, "points": float(low), "evidence": evidence, "reason": "fake"}
                           for t, c, low, _ in picks],
            "fixed_penalties": [], "score": top, "stars": 5, "comment": "fake"}


def kinds_dimension(request: dict[str, Any]) -> str:
    """``"kind:<model title>"`` when the request asks for a reply of any rubric's dimension (or a whole case
    of them) that :func:`dimension_of` does not know (it knows medical_record's), else ""."""
    schema = request_schema(request)
    if not schema:
        return ""
    props = schema.get("properties", {})
    if _kind_of(props):
        return f"kind:{schema.get('title', '')}"
    parts = [_resolve(schema, p) for p in props.values() if isinstance(p, dict)]
    if parts and all(_kind_of(p.get("properties", {})) for p in parts):
        return "kind:case"
    return ""


def kinds_reply(request: dict[str, Any], rng: random.Random, quality: float, bias: float) -> dict[str, Any]:
    """A valid reply (or whole-case reply) for the request's schema, whatever the rubric: a rating near
    ``quality`` (0-1 of the scale) shifted by ``bias`` (levels), verdicts met with probability ``quality``,
    about ``(1 - quality) x 3 + bias`` deductions; evidence quotes the record."""
    schema = request_schema(request) or {}
    record, _ = case_texts(request)

    def one(node: dict[str, Any]) -> dict[str, Any]:
        props = node.get("properties", {})
        evidence = _snippet(rng, record) if record.strip() else ""
        if _kind_of(props) == "deductions":
            return _deductions_reply(schema, node, rng, quality, bias, evidence)
        if _kind_of(props) == "likert":
            levels = sorted(props["rating"]["enum"])
            pos = quality * (len(levels) - 1) - bias + rng.gauss(0, 0.7)
            rating = levels[max(0, min(len(levels) - 1, round(pos)))]
            return {"rating": rating, "evidence": [evidence] if evidence else [], "comment": "fake"}
        if _kind_of(props) == "passfail":
            passed = rng.random() < quality - 0.15 * bias
            return {"verdict": "pass" if passed else "fail", "quote": evidence, "comment": "fake"}
        verdict = _resolve(schema, props["verdicts"]["items"])
        ids = verdict["properties"]["id"]["enum"]
        return {"verdicts": [{"id": i, "met": rng.random() < quality - 0.15 * bias, "evidence": evidence,
                              "reason": "fake"} for i in ids], "comment": "fake"}

    if _kind_of(schema.get("properties", {})):
        return one(schema)
    return {name: one(_resolve(schema, p)) for name, p in schema.get("properties", {}).items()}
