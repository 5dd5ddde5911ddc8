"""Every refusal a review page can show is said in the page's language. The model refuses with a message key of
the review pages' catalogues (``review/i18n/<lang>.json``) and its parameters (:class:`ActionError`), never an
English sentence; the app renders it in the page's language on the adjudication form, the reviewer form and in
the label endpoint's JSON (which the case page shows as "not saved: ..."). The refusals are enumerated from the
source (every ``ActionError(...)`` of the review app's modules, every error the app answers with) and
each is rendered in Chinese and English; then a few are triggered through the model and the test client."""

from __future__ import annotations

import ast
import json
import re
import string
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from markupsafe import escape
from starlette.testclient import TestClient

import consensus_eval.review.app as app_module
import consensus_eval.review.model as model_module
from consensus_eval.review.app import create_app, messages
from consensus_eval.review.model import ActionError, ReviewRun, catalogue, clean_reviewer
from tests.kinds_human_run import build_kinds_run
from tests.test_review import score_run

#: three or more ASCII words in a row: an English sentence (or its piece) left on a Chinese page
ENGLISH = re.compile(r"[A-Za-z']+(?:[ ,]+[A-Za-z']+){2,}")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _raised_keys(source: str, name: str) -> dict[str, set[str]]:
    """Every ``ActionError(key, **params)`` of a module's ``source``: key -> the parameters given; fails on a
    refusal that is not a catalogue key (an f-string, an English sentence, a variable)."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ActionError":
            first = node.args[0] if node.args else None
            keys = [first.body, first.orelse] if isinstance(first, ast.IfExp) else [first]
            for k in keys:
                assert isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.startswith("err_"), \
                    f"{name}:{node.lineno}: a refusal must be a catalogue key, got {ast.unparse(node)}"
                assert len(node.args) == 1, f"{name}:{node.lineno}: parameters are named"
                out.setdefault(k.value, set()).update(kw.arg for kw in node.keywords if kw.arg)
    return out


def _app_errors(path: Path) -> set[str]:
    """The catalogue keys of the errors the app answers with (``{"error": t("err_...")}`` in its JSON, ``error=``
    on a page); fails on an error given as English text (anything but ``t(...)`` or ``ActionError.text(t)``)."""
    keys = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        values = []
        if isinstance(node, ast.Dict):
            values = [v for k, v in zip(node.keys, node.values, strict=True)
                      if isinstance(k, ast.Constant) and k.value == "error"]
        elif isinstance(node, ast.Call):    # error=... on a page; why=... a text (a call) or a code ("team")
            values = [kw.value for kw in node.keywords
                      if kw.arg == "error" or (kw.arg == "why" and isinstance(kw.value, ast.Call))]
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "error" for t in node.targets):
            values = [node.value] if not (isinstance(node.value, ast.Constant) and node.value.value is None) else []
        for v in values:
            if isinstance(v, ast.Name) and v.id in ("error", "why"):   # passed on: checked where it is made
                continue
            assert isinstance(v, ast.Call), f"app.py:{v.lineno}: {ast.unparse(v)}"
            if isinstance(v.func, ast.Attribute) and v.func.attr == "text":
                continue
            assert isinstance(v.func, ast.Name) and v.func.id == "t", f"app.py:{v.lineno}: {ast.unparse(v)}"
            first = v.args[0]
            assert isinstance(first, ast.Constant) and isinstance(first.value, str), ast.unparse(v)
            keys.add(first.value)
    return keys


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_refusal_in_the_code_is_a_catalogue_message_said_in_both_languages() -> None:
    raised: dict[str, set[str]] = {}
    for path in sorted(Path(model_module.__file__).parent.glob("*.py")):   # every module of the review app
        for k, params in _raised_keys(path.read_text(encoding="utf-8"), path.name).items():
            raised.setdefault(k, set()).update(params)
    app_keys = _app_errors(Path(app_module.__file__))
    assert len(raised) >= 35 and {"err_reference_level", "err_give_reference_score", "err_name_empty"} <= set(raised)
    assert {"err_no_reviewer", "err_not_json", "err_not_object", "err_csrf", "missing_case"} <= app_keys
    en, zh = messages("en"), messages("zh")
    assert {k for k in en.texts if k.startswith("err_")} == {k for k in zh.texts if k.startswith("err_")}
    for key, params in sorted(raised.items()):
        assert _fields(en.texts[key]) == params == _fields(zh.texts[key]), key
        sample = {p: "1" for p in params}       # numbers: any ASCII word left is the catalogue's own text
        said_zh, said_en = ActionError(key, **sample).text(zh), ActionError(key, **sample).text(en)
        assert CJK.search(said_zh) and not ENGLISH.search(said_zh), (key, said_zh)
        assert not CJK.search(said_en) and re.search(r"[a-z]+ [a-z]+", said_en), (key, said_en)
        assert str(ActionError(key, **sample)) == said_en       # the API's and the command line's text: English
    for key in app_keys:
        fill = {p: "1" for p in _fields(zh.texts[key])}
        assert CJK.search(zh(key, **fill)) and not ENGLISH.search(zh(key, **fill)), key
        assert not CJK.search(en(key, **fill)), key
    # a refusal written as English text, or given positional parameters, is caught by the enumeration
    for bad in ('raise ActionError(f"{x} is wrong")', 'raise ActionError("x is wrong")',
                'raise ActionError("err_x" if a else f"{b}")', 'raise ActionError("err_x", 3)'):
        with pytest.raises(AssertionError, match="snippet:1"):
            _raised_keys(bad, "snippet")


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return score_run(tmp_path_factory.mktemp("refusals"))


@pytest.fixture
def run_dir(scored: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    for f in scored.iterdir():
        if f.is_file():
            (out / f.name).write_bytes(f.read_bytes())
    return out


@pytest.fixture
def review(run_dir: Path) -> Iterator[ReviewRun]:
    with closing(ReviewRun.open(run_dir)) as r:
        yield r


@pytest.mark.parametrize(("action", "key", "zh_has"), [
    ({"op": "score", "case": 1, "dimension": "accuracy", "value": 41}, "err_score_range",
     "accuracy 的评分须在 0 至 40"),
    ({"op": "score", "case": 1, "dimension": "accuracy", "value": "nan"}, "err_score_number", "不是数字"),
    ({"op": "score", "case": 1, "dimension": "nope", "value": 1}, "err_not_dimension", "'nope' 不是评分标准中的维度"),
    ({"op": "score", "case": 999, "dimension": "accuracy", "value": 1}, "err_no_case", "没有第 999 个病例"),
    ({"op": "score", "case": "1"}, "err_case_int", "整数"),
    ({"op": "scores", "case": 1, "scores": {"accuracy": 1}}, "err_no_score", "没有 completeness 的评分"),
    ({"op": "scores", "case": 1, "scores": [], "accepted": []}, "err_scores_map", "必须把维度对应到评分"),
    ({"op": "scores", "case": 1, "scores": {}, "accepted": "x"}, "err_accepted_list", "必须列出维度"),
    ({"op": "verdict", "case": 1, "ids": ["deadbeef#d0"], "verdict": "agree"}, "err_not_deduction", "不是病例"),
    ({"op": "verdict", "case": 1, "ids": []}, "err_ids", "必须列出该行扣分"),
    ({"op": "add", "case": 1, "dimension": "accuracy", "type": "fh_absent"}, "err_not_type", "扣分类型或固定扣分"),
    ({"op": "add", "case": 1, "dimension": "completeness", "type": "fh_absent", "points": 99}, "err_points_range",
     "99 分超出 fh_absent 的范围"),
    ({"op": "add", "case": 1, "dimension": "completeness", "type": "fh_absent", "points": "x"}, "err_points_number",
     "扣分：'x' 不是数字"),
    ({"op": "remove", "case": 1, "id": "abc#d0"}, "err_not_added", "不是复核者添加的扣分"),
    ({"op": "comment", "case": 1, "comment": 3}, "err_comment_text", "评论必须是文本"),
    ({"op": "comment", "case": 1, "comment": "x" * 10_001}, "err_comment_long", "评论超过 10000 个字符"),
    ({"op": "criterion", "case": 1, "dimension": "accuracy", "criterion": "c"}, "err_not_criteria_dim",
     "不是条目型维度"),
    ({"op": "drop_tables", "case": 1}, "err_unknown_op", "未知操作 'drop_tables'"),
])
def test_the_models_refusals_carry_their_key_and_are_said_in_chinese(review: ReviewRun, action: dict[str, object],
                                                                     key: str, zh_has: str) -> None:
    with pytest.raises(ActionError) as caught:
        review.apply("alice", action)
    e = caught.value
    assert e.key == key and zh_has in e.text(catalogue("zh"))
    assert str(e) == e.text(catalogue("en")) and not CJK.search(str(e))


def test_a_reviewers_name_is_refused_in_the_pages_language() -> None:
    said = {}
    for bad, key in (("   ", "err_name_empty"), ("a\x00b", "err_name_control"), ("x" * 81, "err_name_long")):
        with pytest.raises(ActionError) as caught:
            clean_reviewer(bad)
        assert caught.value.key == key
        said[key] = caught.value.text(catalogue("zh"))
    assert said == {"err_name_empty": "复核者姓名为空", "err_name_control": "复核者姓名含有控制字符",
                    "err_name_long": "复核者姓名超过 80 个字符"}


def _solo(review: ReviewRun, lang: str, reviewer: str | None = "chen") -> tuple[TestClient, str]:
    app, sessions = create_app(review, reviewer=reviewer, lang=lang)
    c = TestClient(app, base_url="http://127.0.0.1:8765")
    assert c.get(f"/?token={sessions.token}", follow_redirects=False).status_code == 303
    page = c.get("/").text
    csrf = (page.split('name="csrf-token" content="')[1] if 'name="csrf-token"' in page
            else page.split('name="csrf" value="')[1]).split('"')[0]
    return c, csrf


def test_a_post_in_chinese_gets_the_chinese_refusal_and_in_english_the_english_one(run_dir: Path) -> None:
    bad = {"op": "score", "case": 1, "dimension": "accuracy", "value": 41}
    for lang, said in (("zh", "accuracy 的评分须在 0 至 40 之间，收到的是 41"),
                       ("en", "a score of accuracy is between 0 and 40, got 41")):
        t = messages(lang)
        with closing(ReviewRun.open(run_dir)) as review:
            c, csrf = _solo(review, lang)
            with c:
                r = c.post("/api/label", content=json.dumps(bad), headers={"X-CSRF-Token": csrf})
                assert r.status_code == 400 and r.json() == {"error": said}
                r = c.post("/api/label", content=b"{not json", headers={"X-CSRF-Token": csrf})
                assert r.status_code == 400 and r.json()["error"] == t("err_not_json")
                r = c.post("/api/label", content=b"[1]", headers={"X-CSRF-Token": csrf})
                assert r.status_code == 400 and r.json()["error"] == t("err_not_object")
                # the adjudication form: a reference score missing (no verdict conflict: every score is needed)
                r = c.post("/adjudicate/1", data={"csrf": csrf, "score_accuracy": "30"}, follow_redirects=False)
                assert r.status_code == 400
                assert f'<p class="error">{escape(t("err_give_reference_score", dim="completeness"))}</p>' in r.text
        # the reviewer form of a server without a name: an empty name refused on the page, in its language
        with closing(ReviewRun.open(run_dir)) as review:
            c, csrf = _solo(review, lang, reviewer=None)
            with c:
                r = c.post("/reviewer", data={"csrf": csrf, "reviewer": "   ", "next": "/"}, follow_redirects=False)
                assert r.status_code == 400 and f'<p class="error">{escape(t("err_name_empty"))}</p>' in r.text
    assert messages("zh")("err_give_reference_score", dim="completeness") == "请给出 completeness 的参考评分"


def test_a_likert_and_a_criteria_refusal_in_chinese(tmp_path: Path) -> None:
    folder = build_kinds_run(tmp_path / "mixed", "mixed", n_cases=3)
    zh = catalogue("zh")
    with closing(ReviewRun.open(folder)) as r:
        for action, key, said in (
                ({"op": "score", "case": 1, "dimension": "accurate", "value": 2.5}, "err_level",
                 "accurate 的评分须为其等级 1-5 之一（整级），收到的是 2.5"),
                ({"op": "criterion", "case": 1, "dimension": "safety", "criterion": "nope", "met": True},
                 "err_not_criterion", "'nope' 不是本病例 safety 的条目"),
                ({"op": "criterion", "case": 1, "dimension": "safety", "criterion": "meds", "met": "yes"}, "err_met",
                 "“met”只能是 true、false 或 null")):
            with pytest.raises(ActionError) as caught:
                r.apply("li", action)
            assert (caught.value.key, caught.value.text(zh)) == (key, said)
        with pytest.raises(ActionError) as caught:
            r.adjudicate("chen", 1, {"accurate": "3.5"})
        assert caught.value.text(zh) == "accurate 的参考等级须为其等级 1-5 之一（整级），收到的是 3.5"
