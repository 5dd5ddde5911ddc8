"""The review app without a browser: its model (texts with evidence marks, actions as stored labels,
concurrent writers) and its HTTP guards (access token, CSRF, Origin, Host, escaping), through
Starlette's TestClient. The browser flow is tests/test_review_browser.py."""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import NoReturn

import pytest
from starlette.testclient import TestClient

from consensus_eval import api
from consensus_eval._errors import InputError
from consensus_eval.analysis.derived import read_run
from consensus_eval.analysis.human import read_labels
from consensus_eval.domain.hosts import is_loopback
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.domain.sections import Sections
from consensus_eval.execution.store import HumanLabelRecord, ReviewerRole, Store
from consensus_eval.review.app import Sessions, create_app
from consensus_eval.review.model import (
    ActionError,
    Filters,
    ItemView,
    Progress,
    ReviewRun,
    clean_reviewer,
    line_blocks,
    mark_text,
    record_blocks,
)
from tests.conftest import EXAMPLES, ROOT
from tests.helpers import all_present

XSS = "<script>alert('xss')</script><img src=x onerror=alert(1)>"


def review_cases(folder: Path) -> Path:
    """The 16 examples plus a copy of case-04 (a fixed penalty: it needs review) with markup injected
    into its record, its conversation and its id's neighbourhood."""
    lines = [json.loads(x) for x in EXAMPLES.read_text(encoding="utf-8").splitlines() if x.strip()]
    base = next(c for c in lines if c["id"] == "case-04")
    xss = {**base, "id": "case-xss", "record": XSS + "\n" + base["record"],
           "conversation": f"患者：{XSS}\n{base['conversation']}"}
    path = folder / "cases.jsonl"
    path.write_text("\n".join(json.dumps(c, ensure_ascii=False) for c in [*lines, xss]) + "\n", encoding="utf-8")
    return path


def score_run(folder: Path) -> Path:
    """The cases of :func:`review_cases` scored by the default config (rules judge, offline)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "run"
    api.run(api.prepare(review_cases(folder), ROOT / "configs" / "default.yaml"), out, n_boot=50)
    return out


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return score_run(tmp_path_factory.mktemp("review"))


@pytest.fixture
def run_dir(scored: Path, tmp_path: Path) -> Path:
    """A fresh copy of the scored run (each test writes its own labels)."""
    out = tmp_path / "run"
    out.mkdir()
    for f in scored.iterdir():
        if f.is_file():
            (out / f.name).write_bytes(f.read_bytes())
    return out


@pytest.fixture
def review(run_dir: Path) -> Iterator[ReviewRun]:
    r = ReviewRun.open(run_dir)
    yield r
    r.close()


def first_item(r: ReviewRun, reviewer: str, rank: int) -> ItemView:
    view = r.case_view(reviewer, rank)
    return next(it for d in view.dims for jc in d.judges for it in jc.items)


# --------------------------------------------------------------------------- texts and marks


def test_mark_text_splits_at_overlapping_marks_and_blocks() -> None:
    text = "主诉：口干3年。\n现病史：血糖高。"
    blocks = record_blocks(text, Sections.of(load_rubric("medical_record")))
    assert [(b[0], text[b[1]:b[2]]) for b in blocks] == [("主诉", "主诉：口干3年。\n"), ("现病史", "现病史：血糖高。")]
    out = mark_text(text, blocks, [(3, 7, 1), (5, 13, 2)])
    parts = [(p.text, p.marks) for b in out for p in b.parts]
    assert parts == [("主诉：", ()), ("口干", (1,)), ("3年", (1, 2)), ("。\n", (2,)), ("现病史：", (2,)),
                     ("血糖高。", ())]
    assert "".join(p.text for b in out for p in b.parts) == text      # nothing lost or repeated


def test_conversation_lines_are_labelled_by_speaker() -> None:
    text = "医生：哪里不舒服？\n患者：口干。"
    assert [(lb, text[a:b]) for lb, a, b in line_blocks(text)] == [("医生", "医生：哪里不舒服？"),
                                                                    ("患者", "患者：口干。")]


def test_case_view_marks_every_grounded_span(review: ReviewRun) -> None:
    a = next(a for a in review.queue.cases if a.case_id == "case-04")
    view = review.case_view("alice", a.rank)
    items = [it for d in view.dims for jc in d.judges for it in jc.items]
    assert items and all(it.grounded for it in items)
    marked = {n for blocks in (view.record, view.conversation) for b in blocks for p in b.parts for n in p.marks}
    assert marked == {it.n for it in items}
    penalty = next(it for it in items if it.kind == "penalty")
    assert penalty.sections == ["既往史"]
    text = "".join(p.text for b in view.record for p in b.parts if penalty.n in p.marks)
    assert text == penalty.evidence


# --------------------------------------------------------------------------- actions as labels


def test_actions_store_labels_under_the_reviewer(review: ReviewRun, run_dir: Path) -> None:
    it = first_item(review, "alice", 1)
    review.apply("alice", {"op": "verdict", "case": 1, "ids": it.ids, "verdict": "disagree", "comment": "no"})
    review.apply("alice", {"op": "score", "case": 1, "dimension": "accuracy", "value": 33})
    review.apply("alice", {"op": "comment", "case": 1, "dimension": None, "comment": "looked at it"})
    added = review.apply("alice", {"op": "add", "case": 1, "dimension": "completeness", "type": "fh_absent",
                                   "points": None, "comment": "家族史"})["id"]
    reply = review.apply("bob", {"op": "verdict", "case": 1, "ids": it.ids, "verdict": "agree", "comment": ""})
    assert reply["state"] == "started" and reply["progress"].startswith("0 of ")
    with Store.open_existing(run_dir, read_only=True) as store:
        alice = {(lb.kind, lb.dimension, lb.deduction_id): lb for lb in store.human_labels(reviewer="alice")}
        bob = store.human_labels(reviewer="bob")
    verdicts = [lb for lb in alice.values() if lb.kind == "verdict"]
    assert sorted(all_present(lb.deduction_id for lb in verdicts)) == sorted(it.ids)
    assert {(lb.value, lb.comment) for lb in verdicts} == {("disagree", "no")}
    assert alice[("score", "accuracy", None)].value == 33
    assert alice[("comment", None, None)].comment == "looked at it"
    add = alice[("added_deduction", "completeness", added)]
    assert (add.value, add.points, add.comment) == ("fh_absent", 4, "家族史")
    assert all(lb.source == "review" and lb.labelled_at > 0 for lb in alice.values())
    assert [(lb.kind, lb.value) for lb in bob] == [("verdict", "agree")] * len(it.ids)


def test_a_verdict_cleared_keeps_its_comment_and_the_other_way_round(review: ReviewRun, run_dir: Path) -> None:
    it = first_item(review, "alice", 1)
    act = {"op": "verdict", "case": 1, "ids": it.ids}
    review.apply("alice", {**act, "verdict": None, "comment": "why this?"})
    review.apply("alice", {**act, "verdict": "unsure", "comment": "why this?"})
    with Store.open_existing(run_dir, read_only=True) as store:
        assert [(lb.kind, lb.value, lb.comment) for lb in store.human_labels()] == [("verdict", "unsure", "why this?")]
    review.apply("alice", {**act, "verdict": None, "comment": "why this?"})
    review.apply("alice", {**act, "verdict": None, "comment": ""})
    with Store.open_existing(run_dir, read_only=True) as store:
        assert store.human_labels() == []
    assert first_item(review, "alice", 1).verdict is None


def test_done_needs_a_score_for_every_dimension(review: ReviewRun) -> None:
    total = review.progress("alice").total
    assert total == sum(a.needs_review for a in review.queue.cases) >= 3
    reply = review.apply("alice", {"op": "scores", "case": 1,
                                   "scores": {"accuracy": 30, "completeness": 31, "standardization": 25}})
    assert {k: reply[k] for k in ("state", "progress", "done", "total", "applied")} == {
        "state": "done", "progress": f"1 of {total} done", "done": 1, "total": total, "applied": True}
    review.apply("alice", {"op": "score", "case": 1, "dimension": "standardization", "value": None})
    assert review.progress("alice").done == 0 and review.progress("alice").started == 1


class _NoPass(list):  # type: ignore[type-arg]
    """A list of cases that refuses to be walked through (indexing and len are allowed)."""

    def __iter__(self) -> NoReturn:
        raise AssertionError("a save walked through every case of the run")


def test_a_save_answers_from_the_reviewers_ledger_without_a_pass_over_the_run(review: ReviewRun, run_dir: Path) -> None:
    """Progress and state after each save come from the reviewer's ledger, updated by the save: the same as
    recomputed from every label, without reading the reviewer's labels or walking the run's cases; a write by
    another connection (a sheet import, an assignment) is picked up."""
    import random

    def recomputed(reviewer: str) -> tuple[int, int, int, dict[str, str]]:
        states = review.states(review.labels(reviewer))
        assigned = {c for c, names in review.assignments().items() if reviewer in names}
        pool = [a.case_id for a in review.queue.cases if (a.case_id in assigned if assigned else a.needs_review)]
        return (sum(states.get(c) == "done" for c in pool), sum(states.get(c) == "started" for c in pool),
                len(pool), states)

    rng = random.Random(7)
    n = len(review.queue.cases)
    dims = [d.id for d in review.dimensions]
    review.progress("alice")                                       # the ledger, read once
    cases, labels = review.queue.cases, review.store.human_labels
    review.queue.cases = _NoPass(cases)

    def no_read(**kw: object) -> NoReturn:
        raise AssertionError("a save read the reviewer's labels back")

    review.store.human_labels = no_read                            # type: ignore[method-assign]
    replies = []
    try:
        for _ in range(120):
            rank = rng.randrange(1, n + 1)
            op = rng.choice(["score", "clear", "comment", "scores"])
            if op == "score":
                act = {"op": "score", "case": rank, "dimension": rng.choice(dims), "value": rng.randrange(0, 20)}
            elif op == "clear":
                act = {"op": "score", "case": rank, "dimension": rng.choice(dims), "value": None}
            elif op == "comment":
                act = {"op": "comment", "case": rank, "comment": rng.choice(["", "看过"])}
            else:
                act = {"op": "scores", "case": rank, "scores": dict.fromkeys(dims, 10)}
            replies.append((cases[rank - 1].case_id, review.apply("alice", act)))
    finally:
        review.queue.cases, review.store.human_labels = cases, labels  # type: ignore[method-assign]
    done, started, total, states = recomputed("alice")
    assert review.progress("alice") == Progress(done, started, total) and 0 < done < total
    assert replies[-1][1]["state"] == states.get(replies[-1][0], "todo")
    assert (replies[-1][1]["done"], replies[-1][1]["total"]) == (done, total)
    # another connection writes: an assignment, then labels; the next save sees both
    mine = [a.case_id for a in cases[:3]]
    with Store.open_existing(run_dir) as other:
        other.replace_assignments([(c, "alice") for c in mine])
    reply = review.apply("alice", {"op": "comment", "case": 1, "comment": "again"})
    assert reply["total"] == 3 and review.assigned("alice") == frozenset(mine)
    assert review.progress("alice") == Progress(*recomputed("alice")[:3])
    with Store.open_existing(run_dir) as other:
        for case_id in mine:
            for d in dims:
                other.upsert_human_label(HumanLabelRecord(case_id=case_id, dimension=d, reviewer="alice",
                                                          kind="score", value=5))
    assert review.progress("alice") == Progress(3, 0, 3)


def test_confirming_the_panels_score_stores_it_as_accepted_not_as_the_reviewers_own(review: ReviewRun,
                                                                                    run_dir: Path) -> None:
    a = review.case_at(1)
    panel = {d.dimension: d.panel_score for d in a.dimensions}
    # the page sends the fields the reviewer left untouched as "accepted"; the value is the panel's, taken
    # by the server (a value the page might send for them is not used)
    reply = review.apply("alice", {"op": "scores", "case": 1, "scores": {"accuracy": 30},
                                   "accepted": ["completeness", "standardization"]})
    assert reply["state"] == "done"
    with Store.open_existing(run_dir, read_only=True) as store:
        got = {lb.dimension: (lb.value, lb.origin) for lb in store.human_labels() if lb.kind == "score"}
    assert got == {"accuracy": (30.0, "own"), "completeness": (panel["completeness"], "accepted"),
                   "standardization": (panel["standardization"], "accepted")}
    view = review.case_view("alice", 1)
    assert [(d.id, d.my_origin) for d in view.dims] == [("accuracy", "own"), ("completeness", "accepted"),
                                                        ("standardization", "accepted")]
    # the human-vs-judge figures leave accepted scores out by default, and say how many there were
    results = api.load_run(run_dir, n_boot=0)
    human = results.reliability.human
    assert human is not None and human.n_accepted == 2 and not human.accepted_included
    assert results.review is not None and (cr := results.review.case(a.case_id)) is not None
    assert cr.scores["alice"] == {"accuracy": 30.0}
    assert human.judges[results.judges[0]]["accuracy"].n == 1 and human.judges[results.judges[0]]["completeness"].n == 0


@pytest.mark.parametrize(("action", "message"), [
    ({"op": "score", "case": 1, "dimension": "accuracy", "value": 41}, "between 0 and 40"),
    ({"op": "scores", "case": 1, "scores": {"accuracy": 1}, "accepted": "completeness"}, "must list dimension"),
    ({"op": "score", "case": 1, "dimension": "accuracy", "value": "nan"}, "not a number"),
    ({"op": "score", "case": 1, "dimension": "nope", "value": 1}, "not a dimension"),
    ({"op": "score", "case": 999, "dimension": "accuracy", "value": 1}, "no case at position 999"),
    ({"op": "score", "case": "1", "dimension": "accuracy", "value": 1}, "must be the case's position"),
    ({"op": "verdict", "case": 1, "ids": ["deadbeef#d0"], "verdict": "agree"}, "not a deduction of case"),
    ({"op": "scores", "case": 1, "scores": {"accuracy": 1}}, "no score for completeness"),
    ({"op": "add", "case": 1, "dimension": "accuracy", "type": "fh_absent"}, "not a deduction type"),
    ({"op": "add", "case": 1, "dimension": "completeness", "type": "fh_absent", "points": 99}, "outside"),
    ({"op": "remove", "case": 1, "id": "abc#d0"}, "not a deduction added"),
    ({"op": "drop_tables", "case": 1}, "unknown action"),
])
def test_bad_actions_are_refused_and_store_nothing(review: ReviewRun, run_dir: Path, action: dict[str, object],
                                                   message: str) -> None:
    with pytest.raises(ActionError, match=message):
        review.apply("alice", action)
    with Store.open_existing(run_dir, read_only=True) as store:
        assert store.human_labels() == []


def test_a_verdict_on_another_cases_deduction_is_refused(review: ReviewRun) -> None:
    other = first_item(review, "alice", 2)
    with pytest.raises(ActionError, match="not a deduction of case"):
        review.apply("alice", {"op": "verdict", "case": 1, "ids": other.ids, "verdict": "agree"})


def test_reviewer_names() -> None:
    assert clean_reviewer("  Dr.  Li ") == "Dr. Li"
    for bad in ("", "   ", "a\x00b", "x" * 81):
        with pytest.raises(ActionError):
            clean_reviewer(bad)


def test_labels_while_a_scoring_run_writes_the_same_store(review: ReviewRun, run_dir: Path) -> None:
    """Another connection writing calls in long transactions (as `score` does) only makes a label wait."""
    rec = review.results.records[0]
    errors: list[BaseException] = []
    stop = threading.Event()

    def scorer() -> None:
        try:
            with Store(run_dir / "results.sqlite") as store:
                i = 0
                while not stop.is_set():
                    with store._transaction(immediate=True):
                        for _ in range(20):
                            store._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                                              (f"noise{i % 50}", json.dumps(i)))
                            i += 1
                    store.record(rec.to_record().model_copy(update={"latency_s": float(i)}))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    t = threading.Thread(target=scorer)
    t.start()
    try:
        it = first_item(review, "alice", 1)
        for k in range(40):
            review.apply("alice", {"op": "score", "case": 1, "dimension": "accuracy", "value": k % 40})
            review.apply("alice", {"op": "verdict", "case": 1, "ids": it.ids, "verdict": ("agree", "unsure")[k % 2],
                                   "comment": f"pass {k}"})
    finally:
        stop.set()
        t.join()
    assert errors == []
    with Store.open_existing(run_dir, read_only=True) as store:
        labels = store.human_labels(reviewer="alice")
        assert len(store.calls()) == len(review.results.records)
    assert {(lb.kind, lb.value if lb.kind == "score" else lb.comment) for lb in labels} == {
        ("score", 39), ("verdict", "pass 39")}


def test_the_sheet_is_the_audit_export_filled_in_and_reads_back(review: ReviewRun, run_dir: Path,
                                                                tmp_path: Path) -> None:
    it = first_item(review, "alice", 1)
    review.apply("alice", {"op": "verdict", "case": 1, "ids": it.ids, "verdict": "disagree", "comment": "=1+1"})
    review.apply("alice", {"op": "scores", "case": 1,
                           "scores": {"accuracy": 30, "completeness": 31, "standardization": 25}})
    review.apply("bob", {"op": "verdict", "case": 1, "ids": it.ids, "verdict": "agree"})
    data = review.sheet("alice")
    assert data.startswith(b"\xef\xbb\xbf")
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"))))
    assert {r["reviewer"] for r in rows} == {"alice"}             # every row names the sheet's reviewer
    mine = [r for r in rows if r["human_verdict"] or r["human_score"]]
    assert {(r["row"], r["human_verdict"] or r["human_score"]) for r in mine} == {
        ("deduction", "disagree"), ("score", "30"), ("score", "31"), ("score", "25")}
    assert next(r for r in mine if r["row"] == "deduction")["human_comment"] == "'=1+1"   # formula neutralised
    assert len({r["case_id"] for r in rows}) == len(review.queue.cases)
    sheet = tmp_path / "sheet.csv"
    sheet.write_bytes(data)
    back = read_labels(sheet, read_run(Store.open_existing(run_dir, read_only=True)))
    assert sorted((lb.kind, str(lb.value)) for lb in back.labels["alice"]) == sorted(
        [("verdict", "disagree")] * len(it.ids) + [("score", "30.0"), ("score", "31.0"), ("score", "25.0")])


# --------------------------------------------------------------------------- HTTP guards


@pytest.fixture
def client(review: ReviewRun) -> Iterator[_Client]:
    app, sessions = create_app(review, reviewer="alice", lang="en")
    with _Client(app, base_url="http://127.0.0.1:8765") as c:
        c.sessions = sessions
        yield c


class _Client(TestClient):
    """A test client that carries its app's sessions (``sessions.token`` is the login link's)."""

    sessions: Sessions


def login(c: _Client) -> str:
    r = c.get(f"/?token={c.sessions.token}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    page = c.get("/")
    assert page.status_code == 200
    return page.text.split('name="csrf-token" content="')[1].split('"')[0]


def test_pages_need_the_token_link(client: _Client) -> None:
    assert client.get("/").status_code == 403
    assert client.get("/case/1").status_code == 403
    assert client.get("/sheet.csv").status_code == 403
    assert client.get("/?token=wrong").status_code == 403
    login(client)
    assert client.get("/case/1").status_code == 200
    assert client.get("/case/999").status_code == 404
    assert client.get("/case/..%2f..%2fetc%2fpasswd").status_code == 404
    assert client.get("/static/../model.py").status_code == 404


def test_posts_without_the_csrf_token_or_from_another_origin_are_refused(client: _Client, run_dir: Path) -> None:
    csrf = login(client)
    act = {"op": "score", "case": 1, "dimension": "accuracy", "value": 12}
    assert client.post("/api/label", json=act).status_code == 403
    assert client.post("/api/label", json=act, headers={"X-CSRF-Token": "0" * 64}).status_code == 403
    assert client.post("/api/label", json=act, headers={"X-CSRF-Token": csrf,
                                                         "Origin": "http://evil.example"}).status_code == 403
    assert client.post("/api/label", json=act, headers={"X-CSRF-Token": csrf,
                                                         "Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert client.post("/reviewer", data={"reviewer": "mallory"}).status_code == 403
    with Store.open_existing(run_dir, read_only=True) as store:
        assert store.human_labels() == []
    ok = client.post("/api/label", json=act, headers={"X-CSRF-Token": csrf, "Origin": "http://127.0.0.1:8765"})
    assert ok.status_code == 200 and ok.json()["ok"] is True
    bad = client.post("/api/label", json={**act, "value": 99}, headers={"X-CSRF-Token": csrf})
    assert bad.status_code == 400 and "between 0 and 40" in bad.json()["error"]
    # a body nested 100,000 deep, a lone surrogate, bytes that are not UTF-8: 400, never a 500
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"op": "\\ud800"}', b"\xff\xfe{"):
        hostile = client.post("/api/label", content=body, headers={"X-CSRF-Token": csrf,
                                                                   "Content-Type": "application/json"})
        assert hostile.status_code == 400 and hostile.json()["error"] == "the body is not JSON", body[:20]
    with Store.open_existing(run_dir, read_only=True) as store:
        assert [(lb.reviewer, lb.value) for lb in store.human_labels()] == [("alice", 12)]


def test_another_sessions_token_does_not_work(client: _Client) -> None:
    login(client)
    other_csrf = client.sessions.csrf(client.sessions.new())
    act = {"op": "score", "case": 1, "dimension": "accuracy", "value": 12}
    assert client.post("/api/label", json=act, headers={"X-CSRF-Token": other_csrf}).status_code == 403


def test_only_loopback_host_names_are_answered(client: _Client) -> None:
    login(client)
    assert client.get("/", headers={"Host": "evil.example:8765"}).status_code == 400
    assert client.get("/", headers={"Host": "localhost:8765"}).status_code == 200
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


def test_case_text_is_escaped_and_pages_carry_a_strict_csp(client: _Client, review: ReviewRun) -> None:
    login(client)
    rank = next(a.rank for a in review.queue.cases if a.case_id == "case-xss")
    page = client.get(f"/case/{rank}")
    assert "<script>alert" not in page.text and "<img src=x" not in page.text
    assert "&lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt;" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "<script>" not in page.text.replace('<script src="/static/review.js" defer></script>', "")


def test_a_session_without_a_name_is_asked_for_one(review: ReviewRun) -> None:
    app, sessions = create_app(review, lang="en")
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        c.get(f"/?token={sessions.token}")
        page = c.get("/case/1")
        assert 'id="reviewer-form"' in page.text
        csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
        r = c.post("/reviewer", data={"reviewer": "Dr Wang", "csrf": csrf, "next": "//evil.example"},
                   follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/"
        assert "reviewer: <strong id=\"reviewer-name\">Dr Wang</strong>" in c.get("/").text


def test_queue_filters(client: _Client, review: ReviewRun) -> None:
    login(client)
    page = client.get("/")
    assert page.text.count('class="row ') == review.progress("alice").total
    assert "0 of " in page.text and "j / ↓" in page.text
    assert client.get("/?scope=all").text.count('class="row ') == len(review.queue.cases)
    assert client.get("/?reason=no_such_reason").text.count('class="row ') == 0
    assert client.get("/?state=done").text.count('class="row ') == 0


# --------------------------------------------------------------------------- a panel of three judges


def test_a_panel_case_shows_every_judge_escaped_and_takes_verdicts(tmp_path: Path) -> None:
    """The hand-built 3-judge store of tests/test_audit.py: c2 has judges far apart and a deduction
    whose evidence is markup; every judge is a column, the markup is text, a verdict on a line goes to
    that judge's deduction only."""
    from tests.test_audit import JUDGES, XSS_EVIDENCE, build_panel_store

    folder = build_panel_store(tmp_path / "panel")
    r = ReviewRun.open(folder)
    try:
        a = next(a for a in r.queue.cases if a.case_id == "c2")
        assert r.queue.mode == "disagreement" and a.needs_review
        view = r.case_view("alice", a.rank)
        accuracy = view.dims[0]
        assert [jc.judge for jc in accuracy.judges] == JUDGES
        assert [len(jc.items) for jc in accuracy.judges] == [4, 1, 1]
        b_item = accuracy.judges[1].items[0]
        assert b_item.evidence == XSS_EVIDENCE and b_item.grounded
        r.apply("alice", {"op": "verdict", "case": a.rank, "ids": b_item.ids, "verdict": "disagree"})
        verdicts = [lb for lb in r.labels("alice") if lb.kind == "verdict"]
        assert [(lb.deduction_id, lb.value) for lb in verdicts] == [(b_item.ids[0], "disagree")]
        app, sessions = create_app(r, reviewer="alice", lang="en")
        with TestClient(app, base_url="http://127.0.0.1:8765") as c:
            c.get(f"/?token={sessions.token}")
            page = c.get(f"/case/{a.rank}").text
            failed = c.get(f"/case/{next(x.rank for x in r.queue.cases if x.case_id == 'c4')}").text
        assert failed.count("failed: timeout after 120 s") == len(JUDGES) * len(view.dims)
        assert "<img src=x" not in page and "二甲双胍&lt;img src=x onerror=alert(1)&gt;" in page
        assert page.count('class="judge"') == 3 * len(view.dims)
        assert page.count('aria-pressed="true"') == 1
    finally:
        r.close()


def test_pages_in_chinese_by_default_for_a_chinese_rubric(review: ReviewRun) -> None:
    app, sessions = create_app(review, reviewer="李医生")
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        c.get(f"/?token={sessions.token}")
        queue = c.get("/").text
        case = c.get("/case/1").text
        csrf = case.split('name="csrf-token" content="')[1].split('"')[0]
        reply = c.post("/api/label", json={"op": "score", "case": 1, "dimension": "accuracy", "value": 30},
                       headers={"X-CSRF-Token": csrf}).json()
    assert '<html lang="zh-CN">' in queue and "风险最高的病例" in queue and "已完成 0 / " in queue
    assert "复核人：" in queue and "下载已填写的复核表" in queue and "固定扣分" in queue
    assert "病历" in case and "对话" in case and ">同意</button>" in case and "确认评分" in case
    assert reply["progress"].startswith("已完成 0 / ") and reply["state"] == "started"
    with pytest.raises(InputError, match="--lang must be one of"):
        create_app(review, lang="fr")


def test_a_deduction_repeated_in_three_runs_is_one_line_and_three_verdicts(tmp_path: Path) -> None:
    """An important case judged 3 times: the same deduction in every run is one line ('all 3 runs'),
    and its verdict is stored against each run's deduction id, as the sheet has one row per run."""
    from consensus_eval.domain.config import EvalConfig
    from consensus_eval.domain.judgment import Judgment
    from consensus_eval.domain.rubric import load_rubric
    from consensus_eval.execution.store import PlannedCall
    from tests.helpers import write_store
    from tests.test_audit import DIMS, _d, _record, panel_cases

    case = panel_cases()[:1]
    rubric = load_rubric("medical_record")
    config = EvalConfig.model_validate({"judges": [{"name": "judge-a", "model": "openai/judge-a"}]})
    planned = [PlannedCall(f"c1|judge-a|{d}|{run}", "c1", d, "judge-a", run) for d in DIMS for run in range(3)]
    deduction = Judgment(dimension="accuracy", deductions=[_d("numbers", "value_error", 2, "空腹7.9")])
    records = [_record(p, deduction if p.dimension == "accuracy" else None) for p in planned]
    folder = write_store(tmp_path / "runs", rubric, config, case, records, planned)
    r = ReviewRun.open(folder)
    try:
        view = r.case_view("alice", 1)
        items = [it for jc in view.dims[0].judges for it in jc.items]
        assert len(items) == 1 and len(items[0].ids) == 3 and "3 runs" in items[0].runs_label
        r.apply("alice", {"op": "verdict", "case": 1, "ids": items[0].ids, "verdict": "disagree"})
        assert sorted(all_present(lb.deduction_id for lb in r.labels("alice"))) == sorted(items[0].ids)
        rows = list(csv.DictReader(io.StringIO(r.sheet("alice").decode("utf-8-sig"))))
        assert [row["run"] for row in rows if row["human_verdict"] == "disagree"] == ["1", "2", "3"]   # from 1
        assert r.case_view("alice", 1).dims[0].judges[0].items[0].verdict == "disagree"
    finally:
        r.close()


def test_a_real_score_run_waits_for_the_review_app_to_let_go(review: ReviewRun, run_dir: Path,
                                                              tmp_path: Path) -> None:
    """The review app holds the run while it serves (docs/limits.md, 'One writer per run'). `consensus-eval score` in
    another process is refused at once, naming the holder, with nothing written (exit 6); with --wait-lock it
    waits while labels are written, and adds the second judge's calls once the app lets go: nothing is lost."""
    import subprocess

    from tests.cli_zygote import Zygote
    from tests.helpers import cli_run

    config = tmp_path / "two.yaml"
    config.write_text("rubric: medical_record\njudges:\n  - {name: rules, kind: rules}\n"
                      "  - {name: rules2, kind: rules}\n", encoding="utf-8")
    cmd = ["score", str(review_cases(tmp_path)), "--config", str(config), "--out", str(run_dir)]
    before = (run_dir / "results.sqlite").read_bytes()
    refused = cli_run(cmd, cwd=ROOT)   # another process, forked from a warm one (tests/cli_zygote.py)
    assert refused.returncode == 6, refused.stdout + refused.stderr
    assert f"being written by `the Python API` (pid {os.getpid()}" in refused.stderr
    assert (run_dir / "results.sqlite").read_bytes() == before
    proc = Zygote.popen([*cmd, "--wait-lock"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    waiting = proc.stderr.readline()
    assert "waiting for `the Python API`" in waiting, waiting
    it = first_item(review, "alice", 1)
    for k in range(20):
        review.apply("alice", {"op": "score", "case": 1, "dimension": "accuracy", "value": k % 40})
        review.apply("alice", {"op": "verdict", "case": 1, "ids": it.ids, "verdict": "agree", "comment": f"#{k}"})
    assert proc.poll() is None   # still waiting
    review.close()
    out, err = proc.communicate()
    assert proc.returncode == 0, out + err
    with Store.open_existing(run_dir, read_only=True) as store:
        judges = {c.judge for c in store.calls()}
        labels = store.human_labels(reviewer="alice")
    assert judges == {"rules", "rules2"}
    assert {(lb.kind, lb.value if lb.kind == "score" else lb.comment) for lb in labels} == {
        ("score", 19), ("verdict", "#19")}


def test_spot_check_cases_are_shown_apart_and_blind_until_the_reviewers_own_scores(run_dir: Path) -> None:
    done = api.spot_check(run_dir, 3, seed=11)
    spot = [r.case_id for r in done.sample]
    review = ReviewRun.open(run_dir)
    try:
        rows = review.rows("alice", Filters(scope="spot"))
        assert sorted(r.audit.case_id for r in rows) == sorted(spot) and all(r.spot and r.blind for r in rows)
        rank = rows[0].audit.rank
        case_id = rows[0].audit.case_id
        view = review.case_view("alice", rank)
        assert view.spot and view.blind
        assert not any(p.marks for b in view.record for p in b.parts)          # no evidence mark either
        app, sessions = create_app(ReviewRun.open(run_dir), reviewer="alice", lang="en")
        with _Client(app, base_url="http://127.0.0.1:8765") as c:
            c.sessions = sessions
            login(c)
            page = html.unescape(c.get(f"/case/{rank}").text)
            judges = review.results.judges
            assert 'data-blind="yes"' in page and "give your own score of every dimension first" in page
            assert 'class="judges"' not in page and 'class="ded' not in page
            assert not any(f"{j} " in page.split('id="case"')[1].split("case-grid")[0] for j in judges)
            queue = html.unescape(c.get("/?scope=spot").text)
            assert queue.count("spot check: the judges' results are hidden until you score it") == 3
        with pytest.raises(ActionError, match="the panel's score cannot be accepted there"):
            review.apply("alice", {"op": "scores", "case": rank, "scores": {}, "accepted": [d.id for d in
                                                                                           review.dimensions]})
        review.apply("alice", {"op": "scores", "case": rank, "scores": {"accuracy": 30, "completeness": 30,
                                                                        "standardization": 20}})
        view = review.case_view("alice", rank)
        assert view.spot and not view.blind
        assert review.case_view("bob", rank).blind                          # bob has not scored it: still blind
        # the sheet: blind for bob, open for alice
        sheet = list(csv.DictReader(io.StringIO(review.sheet("bob").decode("utf-8-sig"))))
        mine = [r for r in sheet if r["case_id"] == case_id]
        assert {r["row"] for r in mine} == {"score"} and {r["sample"] for r in mine} == {"spot_check"}
        assert {r["panel_score"] for r in mine} == {""}
        sheet = list(csv.DictReader(io.StringIO(review.sheet("alice").decode("utf-8-sig"))))
        assert all(r["panel_score"] for r in sheet if r["case_id"] == case_id and r["row"] == "score")
    finally:
        review.close()


def test_a_team_each_with_a_personal_link_labels_as_themselves_only(run_dir: Path) -> None:
    from typer.testing import CliRunner

    from consensus_eval.cli import app as cli

    def add(name: str, *extra: str) -> str:
        res = CliRunner().invoke(cli, ["reviewers", "add", name, "--run", str(run_dir), *extra],
                                 env={"COLUMNS": "300"})
        assert res.exit_code == 0, res.output
        return res.output.split("?key=")[1].split()[0]

    alice_key, bob_key = add("dr_alice"), add("dr_bob", "--role", "adjudicator")
    assert "already a reviewer" in CliRunner().invoke(cli, ["reviewers", "add", "dr_alice", "--run", str(run_dir)],
                                                      env={"COLUMNS": "300"}).output
    raw = (run_dir / "results.sqlite").read_bytes()
    assert alice_key.encode() not in raw and bob_key.encode() not in raw     # only hashes are stored
    review = ReviewRun.open(run_dir)
    app, sessions = create_app(review, lang="en")
    with TestClient(app, base_url="http://127.0.0.1:8765") as alice, \
            TestClient(app, base_url="http://127.0.0.1:8765") as bob:
        # the shared token link is off in team mode; a wrong key opens nothing
        r = alice.get(f"/?token={sessions.token}")
        assert r.status_code == 403 and "open your personal link" in html.unescape(r.text)
        assert alice.get("/?key=not-a-key").status_code == 403
        # each personal link: a session labelling as its reviewer, the key dropped from the address
        r = alice.get(f"/?key={alice_key}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/"
        page = alice.get("/").text
        assert 'id="reviewer-name">dr_alice<' in page and 'href="/reviewer"' not in page
        csrf_a = page.split('name="csrf-token" content="')[1].split('"')[0]
        bob.get(f"/?key={bob_key}")
        csrf_b = bob.get("/").text.split('name="csrf-token" content="')[1].split('"')[0]
        act = {"op": "score", "case": 1, "dimension": "accuracy", "value": 30}
        assert alice.post("/api/label", json=act, headers={"X-CSRF-Token": csrf_a}).status_code == 200
        # an adjudicator's entries are references, never a score of their own: the store refuses it
        r = bob.post("/api/label", json={**act, "value": 20}, headers={"X-CSRF-Token": csrf_b})
        assert r.status_code == 400 and "dr_bob is the adjudicator" in r.json()["error"]
        # alice's link cannot be used to act as bob: the name is not hers to change
        r = alice.post("/reviewer", data={"reviewer": "dr_bob", "csrf": csrf_a})
        assert r.status_code == 403 and "cannot label as another reviewer" in r.json()["error"]
        assert alice.post("/api/label", json={**act, "value": 1, "reviewer": "dr_bob"},
                          headers={"X-CSRF-Token": csrf_a}).status_code == 200      # a name in the body is ignored
        with Store.open_existing(run_dir, read_only=True) as store:
            got = {(lb.reviewer, lb.value) for lb in store.human_labels() if lb.kind == "score"}
        assert got == {("dr_alice", 1.0)}
        # taken off the team: the link stops working, and the open session ends at once
        api.remove_reviewer(run_dir, "dr_bob")
        fresh = TestClient(app, base_url="http://127.0.0.1:8765")
        assert fresh.get(f"/?key={bob_key}").status_code == 403
        r = bob.post("/api/label", json={**act, "dimension": "completeness"}, headers={"X-CSRF-Token": csrf_b})
        assert r.status_code == 403 and r.json()["ended"] and "access to this review has ended" in r.json()["error"]
        assert "has ended" in html.unescape(bob.get("/team").text)
        # a new key for alice: her open session ends too; the new link opens a new one
        new_key = add("dr_alice", "--new-key")
        r = alice.post("/api/label", json={**act, "value": 2}, headers={"X-CSRF-Token": csrf_a})
        assert r.status_code == 403 and r.json()["ended"]
        assert alice.get(f"/?key={alice_key}").status_code == 403
        alice.get(f"/?key={new_key}")
        csrf_a = alice.get("/").text.split('name="csrf-token" content="')[1].split('"')[0]
        assert alice.post("/api/label", json={**act, "value": 2}, headers={"X-CSRF-Token": csrf_a}).status_code == 200


def test_double_review_on_assigned_cases_then_adjudication_gives_the_reference(run_dir: Path) -> None:
    done = api.spot_check(run_dir, 4, seed=2)
    spot = [r.case_id for r in done.sample]
    roles: tuple[tuple[str, ReviewerRole], ...] = (("li", "reviewer"), ("wang", "reviewer"), ("zhao", "reviewer"),
                                                   ("chen", "adjudicator"))
    keys = {n: api.add_reviewer(run_dir, n, role=r)[1] for n, r in roles}
    plan = api.assign(run_dir, 2)
    assert set(plan) == set(spot) and all(len(v) == 2 and "chen" not in v for v in plan.values())
    load = {n: sum(n in v for v in plan.values()) for n in ("li", "wang", "zhao")}
    assert sorted(load.values()) == [2, 3, 3]                                  # balanced: 8 reviews over 3
    review = ReviewRun.open(run_dir)
    try:
        case_id = next(iter(plan))
        first, second = plan[case_id]
        rank = next(a.rank for a in review.queue.cases if a.case_id == case_id)
        # each reviewer's queue is their own assigned cases, blind on the spot check, progress over them
        rows = review.rows(first, Filters(scope="mine"))
        assert {r.audit.case_id for r in rows} == {c for c, v in plan.items() if first in v}
        assert all(r.blind for r in rows) and review.progress(first).total == len(rows)
        review.apply(first, {"op": "scores", "case": rank, "scores": {"accuracy": 30, "completeness": 30,
                                                                     "standardization": 20}})
        review.apply(second, {"op": "scores", "case": rank, "scores": {"accuracy": 36, "completeness": 31,
                                                                      "standardization": 21}})
        members, cases = review.team_progress()
        assert {m.name: (m.role, m.assigned) for m in members}["chen"] == ("adjudicator", 0)
        row = next(c for c in cases if c.audit.case_id == case_id)
        assert row.gap == 6 and row.needs_adjudication and row.adjudicated_by == []
        assert {n: st for n, st in row.states.items()} == {first: "done", second: "done"}
        view = review.adjudication_view(rank)
        assert view[0].scores == {first: 30.0, second: 36.0} and view[0].reference is None
        with pytest.raises(ActionError, match="reference score of completeness"):
            review.adjudicate("chen", rank, {"accuracy": 33})
        review.adjudicate("chen", rank, {"accuracy": 33, "completeness": 31, "standardization": 21})
        assert next(c for c in review.team_progress()[1] if c.audit.case_id == case_id).adjudicated_by == ["chen"]
    finally:
        review.close()
    # the reference is the human score of the validity figures; the ceiling is the reviewers' own, before it
    res = api.load_run(run_dir, n_boot=0)
    assert res.review is not None
    cr = res.review.case(case_id)
    assert cr is not None
    assert cr.reference == {"accuracy": 33.0, "completeness": 31.0, "standardization": 21.0, "total": 85.0}
    assert cr.human["total"] == 85.0 and cr.scores[first]["accuracy"] == 30.0 and "chen" not in cr.scores
    assert res.review.reviewers[:2] == [first, second] and "chen" not in res.review.reviewers
    v = res.reliability.validity
    assert v is not None and v.n_labelled == 1
    panel_total = next(c.total for c in res.consensus if c.case_id == case_id)
    assert panel_total is not None
    assert v.scores["total"].raters["panel"].bias == pytest.approx(panel_total - 85)
    # the pages: the adjudicator's team page and form; a reviewer cannot open them
    review = ReviewRun.open(run_dir)
    app, _ = create_app(review, lang="en")
    with TestClient(app, base_url="http://127.0.0.1:8765") as chen, \
            TestClient(app, base_url="http://127.0.0.1:8765") as li:
        chen.get(f"/?key={keys['chen']}")
        page = chen.get("/team").text
        assert 'id="team-cases"' in page and "adjudicated by chen" in page
        form = chen.get(f"/adjudicate/{rank}").text
        csrf = form.split('name="csrf" value="')[1].split('"')[0]
        r = chen.post(f"/adjudicate/{rank}", data={"csrf": csrf, "score_accuracy": "34", "score_completeness": "31",
                                                   "score_standardization": "21"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/team"
        li.get(f"/?key={keys['li']}")
        assert li.get("/team").status_code == 403 and li.get(f"/adjudicate/{rank}").status_code == 403
    review_after = api.load_run(run_dir, n_boot=0).review
    assert review_after is not None and (cr := review_after.case(case_id)) is not None
    assert cr.reference["accuracy"] == 34.0
    # the report's first screen: who reviewed, what was adjudicated
    md = (api.rebuild(run_dir, n_boot=0, lang="en"), (run_dir / "report.md").read_text(encoding="utf-8"))[1]
    assert f"Review progress: 1 of {len(res.consensus)} cases fully scored" in md and "1 adjudicated (chen)" in md


class _VisibleText(HTMLParser):
    """The text a reader sees on a page, and its titles, placeholders and labels (no script or style)."""

    def __init__(self) -> None:
        super().__init__()
        self.skip = 0
        self.out: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.skip += tag in ("script", "style")
        self.out += [v for k, v in attrs if k in ("title", "placeholder", "aria-label") and v]

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(data)


#: ASCII words a Chinese page may show: units in the records, key names, the file format, the tool
ASCII_ALLOWED = {"BMI", "HbA", "kg", "mg", "mmHg", "mmol", "Enter", "Esc", "CSV", "consensus-eval"}


def test_every_review_page_in_chinese_shows_no_english_word(run_dir: Path) -> None:
    """Queue, case pages, team, adjudication, name form and a missing case, in zh: every ASCII word on them
    is a unit, a key, an id (case, judge, folder, reviewer) or comes from the case's own text."""
    chen_key = api.add_reviewer(run_dir, "chen", role="adjudicator")[1]
    key = api.add_reviewer(run_dir, "li_ming")[1]
    api.add_reviewer(run_dir, "wang")
    review = ReviewRun.open(run_dir)
    try:
        # opposite verdicts on a deduction of case 1: the adjudication page lists the conflict too
        item = next(it for d in review.case_view("li_ming", 1).dims for jc in d.judges for it in jc.items)
        for name, verdict in (("li_ming", "agree"), ("wang", "disagree")):
            review.apply(name, {"op": "verdict", "case": 1, "ids": item.ids, "verdict": verdict})
        assert review.verdict_conflicts(1)
        ids = {w for c in review.results.cases for w in re.findall(r"[A-Za-z][A-Za-z_\-]+",
                                                                    f"{c.id} {c.record} {c.conversation_as_text()}")}
        allowed = ASCII_ALLOWED | ids | set(review.results.judges) | {"li_ming", "chen", "wang"} | set(
            re.findall(r"[A-Za-z][A-Za-z_\-]+", str(run_dir)))
        app, _ = create_app(review, lang="zh")
        with TestClient(app, base_url="http://127.0.0.1:8765") as li, \
                TestClient(app, base_url="http://127.0.0.1:8765") as lead:
            li.get(f"/?key={key}")
            lead.get(f"/?key={chen_key}")
            pages = [(li, p) for p in ("/", "/?scope=all", "/case/1", "/case/2", "/case/3", "/case/999")]
            pages += [(lead, "/team"), (lead, "/adjudicate/1"), (li, "/team"),
                      (TestClient(app, base_url="http://127.0.0.1:8765"), "/")]     # refused: no link
            for client, path in pages:
                seen = _VisibleText()
                seen.feed(client.get(path).text)
                words = set(re.findall(r"[A-Za-z][A-Za-z_\-]+", " ".join(seen.out)))
                assert words <= allowed, (path, sorted(words - allowed))
    finally:
        review.close()


def test_a_queue_of_thousands_is_paged_and_searchable(tmp_path: Path) -> None:
    from tests.big_run import build_big_run

    folder = build_big_run(tmp_path / "big", 1500, 2)
    review = ReviewRun.open(folder)
    app, sessions = create_app(review, reviewer="li", lang="en")
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        c.get(f"/?token={sessions.token}")
        first = c.get("/?scope=all").text
        assert first.count('class="row ') == 100 and "page 1 of 15 (1500 cases)" in first
        assert len(first) < 200_000                                 # one page, not 1,500 rows
        last = c.get("/?scope=all&page=15").text
        assert last.count('class="row ') == 100 and 'id="page-next"' not in last and 'id="page-prev"' in last
        assert c.get("/?scope=all&page=99").text.count('class="row ') == 100      # clamped to the last page
        found = c.get("/?scope=all&q=BIG-01234").text
        assert found.count('class="row ') == 1 and ">big-01234</a>" in found


def test_a_verdict_conflict_goes_to_adjudication_and_the_reference_verdict_counts(run_dir: Path) -> None:
    """Two reviewers give opposite verdicts on one judge's deduction (no score gap): the case is on the team
    page's adjudication list; the adjudicator sees both verdicts side by side and gives the reference verdict,
    stored apart from theirs (origin reference), which then decides the deduction in precision and validity."""
    api.spot_check(run_dir, 17, seed=1)                          # every case: the validity figures see the case
    roles: tuple[tuple[str, ReviewerRole], ...] = (("li", "reviewer"), ("wang", "reviewer"), ("chen", "adjudicator"))
    keys = {n: api.add_reviewer(run_dir, n, role=r)[1] for n, r in roles}
    review = ReviewRun.open(run_dir)
    try:
        rank = next(a.rank for a in review.queue.cases if any(jv.deductions for d in a.dimensions for jv in d.judges))
        scores = {"accuracy": 30, "completeness": 30, "standardization": 20}
        for name in ("li", "wang"):                               # the same scores: no gap to adjudicate
            review.apply(name, {"op": "scores", "case": rank, "scores": scores})
        item = next(it for d in review.case_view("li", rank).dims for jc in d.judges for it in jc.items)
        review.apply("li", {"op": "verdict", "case": rank, "ids": item.ids, "verdict": "agree"})
        review.apply("wang", {"op": "verdict", "case": rank, "ids": item.ids, "verdict": "disagree",
                              "comment": "证据不足"})
        case_id = review.case_at(rank).case_id
        row = next(c for c in review.team_progress()[1] if c.audit.case_id == case_id)
        assert row.gap == 0 and row.conflicts == 1 and row.needs_adjudication and row.adjudicated_by == []
        (conflict,) = review.verdict_conflicts(rank)
        assert conflict.ids == item.ids and conflict.judge == item.judge and conflict.type == item.type
        assert conflict.verdicts == {"li": "agree", "wang": "disagree"} and conflict.comments == {"wang": "证据不足"}
        assert conflict.reference is None and not review.scores_needed(rank)
        with pytest.raises(ActionError, match="reference verdict"):
            review.adjudicate("chen", rank, {}, {})
        with pytest.raises(ActionError, match="reference score of completeness"):   # scores: all or none
            review.adjudicate("chen", rank, {"accuracy": 30}, {conflict.key: "agree"})
        assert [lb for lb in review.all_labels() if lb.reviewer == "chen"] == []      # nothing half-stored
        before = api.load_run(run_dir, n_boot=0)
        review.adjudicate("chen", rank, {}, {conflict.key: "disagree"})
        stored = [lb for lb in review.all_labels() if lb.reviewer == "chen"]
        assert {(lb.kind, lb.origin, lb.value, lb.deduction_id) for lb in stored} == {
            ("verdict", "reference", "disagree", i) for i in item.ids}
        row = next(c for c in review.team_progress()[1] if c.audit.case_id == case_id)
        assert row.adjudicated_by == ["chen"] and review.verdict_conflicts(rank)[0].reference == "disagree"
    finally:
        review.close()
    after = api.load_run(run_dir, n_boot=0)
    assert after.review is not None
    cr = after.review.case(case_id)
    assert cr is not None
    assert cr.reference_verdicts == dict.fromkeys(item.ids, "disagree") and cr.reference == {}
    assert {i: cr.verdicts[i] for i in item.ids} == {i: {"li": "agree", "wang": "disagree"} for i in item.ids}
    assert "chen" not in after.review.reviewers and cr.adjudicators == ["chen"]
    # precision: the two opposite verdicts counted before; the reference alone, once, after
    h0, h1 = before.reliability.human, after.reliability.human
    assert h0 is not None and h1 is not None
    p0, p1 = h0.precision[item.judge], h1.precision[item.judge]
    n = len(item.ids)
    assert (p0.agree, p0.disagree) == (n, n) and (p1.agree, p1.disagree) == (0, n)
    assert h1.n_verdicts == h0.n_verdicts - n
    # validity: the reviewers' tie decided nothing; the reference decides the deduction against the judge
    assert before.reliability.validity is not None and after.reliability.validity is not None
    d0, d1 = before.reliability.validity.deductions, after.reliability.validity.deductions
    assert d0 is not None and d1 is not None
    assert d1.judges[item.judge].n == d0.judges[item.judge].n + 1
    assert d1.precision[item.judge].n == d0.precision[item.judge].n + 1
    assert d1.precision[item.judge].k == d0.precision[item.judge].k             # the one added is not deserved
    # the pages: the adjudicator's list and form, the verdicts side by side; the form stores the reference
    review = ReviewRun.open(run_dir)
    app, _ = create_app(review, lang="en")
    with TestClient(app, base_url="http://127.0.0.1:8765") as chen:
        chen.get(f"/?key={keys['chen']}")
        team = chen.get("/team").text
        cells = re.search(rf"<td>{re.escape(case_id)}</td>.*?</tr>", team, re.S)
        assert cells is not None and '<td class="num conflicts">1</td>' in cells.group(0)
        form = chen.get(f"/adjudicate/{rank}").text
        assert 'id="verdict-conflicts"' in form and "li: Agree" in form and "wang: Disagree" in form
        assert html.escape(item.type) in form and "证据不足" in form
        assert 'id="scores-optional"' in form and 'name="score_accuracy" min="0" max="40" step="any" required' \
            not in form
        assert 'name="score_accuracy" min="0" max="40" step="any"' in form  # any value, as the case page takes
        csrf = form.split('name="csrf" value="')[1].split('"')[0]
        r = chen.post(f"/adjudicate/{rank}", data={"csrf": csrf, conflict.key: ""}, follow_redirects=False)
        assert r.status_code == 400 and "reference verdict" in html.unescape(r.text)
        r = chen.post(f"/adjudicate/{rank}", data={"csrf": csrf, conflict.key: "agree"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/team"
    review.close()
    final = api.load_run(run_dir, n_boot=0).review
    assert final is not None and (cr := final.case(case_id)) is not None
    assert cr.reference_verdicts == dict.fromkeys(item.ids, "agree")
