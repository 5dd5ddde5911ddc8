"""Cases loader: JSONL, one case a line, errors naming file:line and field (tests/data/bad/ corpus)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from consensus_eval import InputError
from consensus_eval.domain.cases import Case, Turn, load_cases

BAD = Path(__file__).parent / "data" / "bad"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cases.jsonl"

#: the medical-record rubric's role labels (configs/rubrics/medical_record.yaml)
ROLES = {"doctor": "医生", "patient": "患者", "family": "家属"}


def _write(tmp_path: Path, *lines: str | dict[str, Any], name: str = "cases.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join((json.dumps(x, ensure_ascii=False) if isinstance(x, dict) else x) + "\n"
                         for x in lines), encoding="utf-8")
    return p


TURNS = {"id": "t1", "record": "主诉：口渴3个月",
         "conversation": [{"role": "doctor", "text": "哪里不舒服？"}, {"role": "patient", "text": "口渴3个月。"},
                          {"role": "nurse", "text": "请量血压。"}]}
PLAIN = {"id": "p1", "record": "主诉：多尿1年", "conversation": "医生：您好\n患者：尿多一年了", "important": True,
         "meta": {"source": "clinic"}}


# --------------------------------------------------------------------------- valid input


def test_loads_turns_and_plain_text(tmp_path: Path) -> None:
    res = load_cases(_write(tmp_path, TURNS, PLAIN))
    assert res.errors == []
    turns, plain = res.cases
    assert turns.conversation == [Turn(role="doctor", text="哪里不舒服？"), Turn(role="patient", text="口渴3个月。"),
                                  Turn(role="nurse", text="请量血压。")]
    assert turns.important is False and turns.meta == {}
    # known roles get their Chinese names, unknown roles are shown as written
    assert turns.conversation_as_text(ROLES) == "医生：哪里不舒服？\n患者：口渴3个月。\nnurse：请量血压。"
    assert plain.conversation_as_text(ROLES) == "医生：您好\n患者：尿多一年了"
    assert plain.important is True and plain.meta == {"source": "clinic"}
    assert plain.record == "主诉：多尿1年"


def test_family_role_name() -> None:
    c = Case(id="x", record="r", conversation=[Turn(role="family", text="他最近瘦了")])
    assert c.conversation_as_text(ROLES) == "家属：他最近瘦了"


def test_integer_ids_become_strings(tmp_path: Path) -> None:
    res = load_cases(_write(tmp_path, {**PLAIN, "id": 7}, {**TURNS, "id": 0}))
    assert [c.id for c in res.cases] == ["7", "0"]
    assert all(isinstance(c.id, str) for c in res.cases)


@pytest.mark.parametrize("bad_id", [True, 1.5, None, "", ["a"]])
def test_other_id_types_are_errors(tmp_path: Path, bad_id: object) -> None:
    p = _write(tmp_path, {**PLAIN, "id": bad_id})
    with pytest.raises(InputError, match=rf"{re.escape(str(p))}:1: id"):
        load_cases(p)


def test_integer_and_string_id_collide(tmp_path: Path) -> None:
    # 7 and "7" are the same id once converted
    p = _write(tmp_path, {**PLAIN, "id": 7}, {**TURNS, "id": "7"})
    with pytest.raises(InputError, match=rf"{re.escape(str(p))}:2: id: duplicate case id '7' \(first on line 1\)"):
        load_cases(p)


def test_blank_lines_are_ignored_and_line_numbers_kept(tmp_path: Path) -> None:
    p = _write(tmp_path, "", PLAIN, "   ", "\t", TURNS, "", '{"id": "b"}')
    # lines: 1 "", 2 PLAIN, 3 "   ", 4 "\t", 5 TURNS, 6 "", 7 the bad case (no conversation, no record)
    res = load_cases(p, skip_invalid=True)
    assert [c.id for c in res.cases] == ["p1", "t1"]
    assert len(res.errors) == 1 and res.errors[0].startswith(f"{p}:7: ")


def test_crlf_line_endings(tmp_path: Path) -> None:
    p = tmp_path / "crlf.jsonl"
    p.write_bytes((json.dumps(PLAIN) + "\r\n" + json.dumps(TURNS) + "\r\n").encode())
    assert [c.id for c in load_cases(p).cases] == ["p1", "t1"]


def test_examples_load() -> None:
    res = load_cases(EXAMPLES)
    assert res.errors == []
    assert len(res.cases) == 16
    ids = [c.id for c in res.cases]
    assert len(set(ids)) == 16
    assert all(c.record.strip() and c.conversation_as_text(ROLES).strip() for c in res.cases)


# --------------------------------------------------------------------------- the bad corpus


@pytest.mark.parametrize(("name", "expected"), [
    ("cases_malformed.jsonl", ":2: not valid JSON"),
    ("cases_not_object.jsonl", ":2: a case must be a JSON object, got an array"),
    ("cases_missing_record.jsonl", ":2: record: Field required"),
    ("cases_important_not_bool.jsonl", ":2: important: Input should be a valid boolean"),
    ("cases_conversation_int.jsonl", ":2: conversation"),
    ("cases_empty_record.jsonl", ":2: record: the record to score is empty"),
    ("cases_empty_conversation.jsonl", ":2: conversation: the conversation is empty"),
    ("cases_unknown_field.jsonl", ":2: summary: Extra inputs are not permitted"),
    ("cases_non_utf8.jsonl", ":2: not UTF-8"),
    # line 1 ok-1, line 2 blank, line 3 ok-2, line 4 ok-1 again
    ("cases_duplicate_id.jsonl", ":4: id: duplicate case id 'ok-1' (first on line 1)"),
])
def test_bad_corpus(name: str, expected: str) -> None:
    path = BAD / name
    # without skip_invalid nothing loads: one InputError listing the error with file:line
    with pytest.raises(InputError) as ei:
        load_cases(path)
    msg = str(ei.value)
    assert f"1 invalid line(s) in {path}" in msg
    assert f"{path}{expected}" in msg, msg
    # with skip_invalid the valid line(s) load and the error is returned
    res = load_cases(path, skip_invalid=True)
    assert len(res.errors) == 1 and res.errors[0].startswith(f"{path}{expected}")
    assert "ok-1" in [c.id for c in res.cases]
    assert len(res.cases) == (2 if name == "cases_duplicate_id.jsonl" else 1)


def test_conversation_int_names_both_accepted_shapes() -> None:
    path = BAD / "cases_conversation_int.jsonl"
    res = load_cases(path, skip_invalid=True)
    assert "valid string" in res.errors[0] and "valid list" in res.errors[0]


def test_important_string_is_rejected() -> None:
    path = BAD / "cases_important_yes.jsonl"
    res = load_cases(path, skip_invalid=True)
    assert len(res.errors) == 1 and res.errors[0].startswith(f"{path}:2: important")


def test_non_utf8_bytes_written_here(tmp_path: Path) -> None:
    p = tmp_path / "latin1.jsonl"
    good = json.dumps(PLAIN, ensure_ascii=False).encode()
    p.write_bytes(good + b"\n" + '{"id": "x", "conversation": "caf\u00e9", "record": "r"}'.encode("latin-1") + b"\n")
    res = load_cases(p, skip_invalid=True)
    assert [c.id for c in res.cases] == ["p1"]
    # 'é' (0xe9) is at 0-based byte 32 of line 2: '{"id": ' (7) + '"x", ' (5) + '"conversation": ' (16)
    # + '"caf' (4) = 32 bytes before it
    assert res.errors == [f"{p}:2: not UTF-8 (byte 32: b'\\xe9')"]


def test_all_errors_listed_and_nothing_loads(tmp_path: Path) -> None:
    p = _write(tmp_path, PLAIN, "{not json", "[1, 2]", {"id": "x", "conversation": "c"},
               {**TURNS, "important": "maybe"}, {**TURNS, "id": "t2"})
    with pytest.raises(InputError) as ei:
        load_cases(p)
    msg = str(ei.value)
    assert msg.startswith(f"4 invalid line(s) in {p}; fix them or pass --skip-invalid:")
    for line, what in [(2, "not valid JSON"), (3, "a case must be a JSON object, got an array"),
                       (4, "record: Field required"), (5, "important:")]:
        assert f"{p}:{line}: {what}" in msg
    res = load_cases(p, skip_invalid=True)
    assert [c.id for c in res.cases] == ["p1", "t2"]
    assert [e.split(": ", 1)[0] for e in res.errors] == [f"{p}:{n}" for n in (2, 3, 4, 5)]


def test_several_errors_on_one_line_are_joined(tmp_path: Path) -> None:
    p = _write(tmp_path, {"id": "x", "conversation": "", "record": " ", "extra": 1})
    res = load_cases(p, skip_invalid=True)
    assert res.cases == []
    (err,) = res.errors
    assert err.startswith(f"{p}:1: ")
    for part in ("conversation: the conversation is empty", "record: the record to score is empty",
                 "extra: Extra inputs are not permitted"):
        assert part in err


def test_turn_errors_name_the_turn(tmp_path: Path) -> None:
    p = _write(tmp_path, {"id": "x", "record": "r", "conversation": [{"role": "doctor", "text": "hi"},
                                                                     {"role": "", "text": "x"}]})
    res = load_cases(p, skip_invalid=True)
    assert "[1].role" in res.errors[0]


@pytest.mark.parametrize("name", ["cases_empty.jsonl", "cases_blank_only.jsonl"])
def test_empty_file(name: str) -> None:
    path = BAD / name
    for skip in (False, True):
        with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: no cases \(the file is empty\)$"):
            load_cases(path, skip_invalid=skip)


def test_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.jsonl"
    with pytest.raises(InputError, match=rf"^{re.escape(str(p))}: cannot read cases"):
        load_cases(p)


def test_all_lines_invalid_with_skip_invalid_returns_errors(tmp_path: Path) -> None:
    p = _write(tmp_path, "{", "{")
    res = load_cases(p, skip_invalid=True)
    assert res.cases == [] and len(res.errors) == 2
