"""The review web app (Starlette, served by uvicorn): pages, the label endpoint, and its guards.

**Access.** The server makes a random access token at start and prints the URL with it
(``http://127.0.0.1:8765/?token=...``). Opening that URL starts a browser session (an HttpOnly,
SameSite=Strict cookie, then a redirect to the URL without the token); any request without a known
session is refused (403). Only the hosts the server listens on are answered (``Host`` checked: no DNS
rebinding from a web page).

**Writes.** Every state-changing request is a POST that carries the session's CSRF token (header
``X-CSRF-Token``, or form field ``csrf`` for the reviewer form), an HMAC of the session id under a
per-server secret, compared in constant time; a POST without it, with another session's, or whose
``Origin`` / ``Sec-Fetch-Site`` says it comes from another site is refused with 403 and stores
nothing.

**Pages.** Server-rendered with Jinja2 (autoescape on: every text of a case or a judge is escaped),
under a Content-Security-Policy that allows scripts and styles from this server only (no inline
script), so an injected ``<script>`` in a record is inert twice over. The two static files are read
from the package once and served by fixed routes; no path parameter reaches the filesystem (a case is
addressed by its position in the queue, an integer).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from consensus_eval._errors import InputError
from consensus_eval.analysis.audit import REASON_CODES
from consensus_eval.domain.hosts import LOOPBACK_HOSTS, is_loopback
from consensus_eval.domain.kinds.base import VIEW_CRITERIA, VIEW_DEDUCTIONS, VIEW_LEVELS
from consensus_eval.domain.textio import loads_json
from consensus_eval.output.report.data import review_reasons
from consensus_eval.output.report.fmt import avg
from consensus_eval.output.report.i18n import Messages, default_lang, messages as report_messages
from consensus_eval.review.model import (
    ActionConflict,
    ActionError,
    AdjudicationDim,
    CriterionConflict,
    Filters,
    ReviewRun,
    VerdictConflict,
    catalogue,
    clean_reviewer,
)
from consensus_eval.review.refusals import AccessEnded

#: Content-Security-Policy of every response: nothing but this server's own files
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY", "Cache-Control": "no-store"}
STATIC = {"review.js": "text/javascript; charset=utf-8", "review.css": "text/css; charset=utf-8"}
#: the keyboard shortcuts, as the pages list them (key, catalogue key of what it does)
SHORTCUTS_QUEUE = [("j / ↓", "k_list_next"), ("k / ↑", "k_list_prev"), ("Enter / o", "k_open")]
SHORTCUTS_CASE = [("j / →", "k_next"), ("k / ←", "k_prev"), ("q", "k_queue"), ("n / p", "k_ded"),
                  ("a / d / u", "k_verdict"), ("c", "k_comment"), ("s", "k_confirm"), ("Esc", "k_escape")]
#: the catalogue keys the page's script uses
JS_KEYS = ("js_saving", "js_saved", "js_not_saved", "js_unreachable", "js_need_scores", "js_session_lost",
           "js_session_lost_short", "state_todo", "s_todo",
           "s_started", "s_done", "note_mine", "note_accepted", "note_none", "note_unsaved", "note_revised",
           "remove", "missed", "conflict_title", "conflict_stored", "conflict_yours", "conflict_keep_mine",
           "conflict_take_saved", "conflict_empty", "verdict_clear", "restored", "agree", "disagree", "unsure", "met",
           "not_met")
#: queue rows per page (a queue of 20,000 cases is paged, and searched by case id)
PAGE_SIZE = 100
#: the languages of the pages (``i18n/<lang>.json``)
LANGS = ("zh", "en")


def messages(lang: str) -> Messages:
    """The review pages' catalogue of ``lang``; an InputError names the choices otherwise."""
    if lang not in LANGS:
        raise InputError(f"--lang must be one of {', '.join(LANGS)}, got {lang!r}")
    return catalogue(lang)


#: how dimensions are shown (their kinds' views), in the order the adjudication page's intro names what each takes
KIND_ORDER = (VIEW_DEDUCTIONS, VIEW_LEVELS, VIEW_CRITERIA)


def adjudication_intro(t: Messages, kinds: set[str]) -> str:
    """What the adjudication page asks for, in the words of how the rubric's dimensions are shown (``kinds``:
    their kinds' views): reference scores and verdicts on deductions, reference levels, reference verdicts on
    criteria; a rubric mixing them names each part."""
    if len(kinds) == 1:
        (kind,) = kinds
        return t("adjudicate_intro" + ("" if kind == VIEW_DEDUCTIONS else "_" + kind))
    return t("adjudicate_intro_mixed", what=t("adjudicate_intro_sep").join(
        t("adjudicate_part_" + k) for k in KIND_ORDER if k in kinds))


def adjudication_entries(dims: list[AdjudicationDim], conflicts: list[VerdictConflict],
                         crit_conflicts: list[CriterionConflict], form: dict[str, str] | None) -> dict[str, str]:
    """The value each field of the adjudication form shows (field name -> value; ``""``: none): the reference
    stored so far, or, after a refused POST (``form``), what the adjudicator had entered, so that a 400 keeps
    their levels, scores and verdicts on the page."""
    out = {}
    for d in dims:
        ref = d.reference_level if d.kind == VIEW_LEVELS else d.reference
        out[f"score_{d.id}"] = "" if ref is None else f"{ref:g}"
    for c in conflicts:
        out[c.key] = c.reference or ""
    for cc in crit_conflicts:
        out[cc.key] = "" if cc.reference is None else "met" if cc.reference else "not_met"
    if form is not None:
        out = {k: form.get(k, "").strip() for k in out}
    return out


@dataclass
class Session:
    """One browser session: its id (the cookie), the reviewer it labels as (None: not asked yet).
    ``personal``: opened with a team member's personal link: the name is theirs and cannot be changed."""

    id: str
    reviewer: str | None
    personal: bool = False
    #: the team role of a personal link's reviewer (``reviewer`` / ``adjudicator``; None without a team)
    role: str | None = None
    #: the hash of the personal key it was opened with: the session ends when the reviewer is removed or their
    #: key replaced (every request compares it with the team as stored)
    key_hash: str | None = None
    #: what the store keeps of the session with each label event: a random tag, never the session's secret id
    tag: str = field(default_factory=lambda: secrets.token_hex(6))


class Sessions:
    """The browser sessions of this server (in memory: a restart asks for the token URL again)."""

    def __init__(self, default_reviewer: str | None) -> None:
        self.secret = secrets.token_bytes(32)
        self.token = secrets.token_urlsafe(24)
        self.default_reviewer = default_reviewer
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def new(self, reviewer: str | None = None, role: str | None = None, key_hash: str | None = None) -> Session:
        """A new session, labelling as ``reviewer`` (a personal link's, with its ``role`` and ``key_hash``) or the
        server's default."""
        s = Session(secrets.token_urlsafe(24), reviewer or self.default_reviewer, personal=reviewer is not None,
                    role=role, key_hash=key_hash)
        with self._lock:
            self._by_id[s.id] = s
        return s

    def get(self, sid: str | None) -> Session | None:
        with self._lock:
            return self._by_id.get(sid) if sid else None

    def csrf(self, s: Session) -> str:
        return hmac.new(self.secret, s.id.encode(), hashlib.sha256).hexdigest()

    def token_ok(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(str(token), self.token)

    def csrf_ok(self, s: Session, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(str(token), self.csrf(s))


def _env() -> Environment:
    env = Environment(loader=PackageLoader("consensus_eval.review", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True), trim_blocks=True,
                      lstrip_blocks=True)
    env.filters["num"] = lambda x: avg(x)   # one decimal at most, as the report shows scores
    env.filters["one"] = lambda x: f"{x:.1f}" if x is not None else "–"
    env.filters["qs"] = lambda d: urlencode(d)
    return env


@dataclass
class Review:
    """What every handler of the app works with (``app.state.review``): the run, the sessions, the page's words
    (``t``), the templates, the static files, the session cookie's name."""

    run: ReviewRun
    sessions: Sessions
    t: Messages
    env: Environment
    static: dict[str, bytes]
    js_texts: dict[str, str]
    cookie_name: str

    def page(self, name: str, request: Request, s: Session, status: int = 200, **ctx: Any) -> HTMLResponse:
        t = self.t
        texts = {**self.js_texts, "js_session_lost": t("js_session_lost_team")} if s.personal else self.js_texts
        html = self.env.get_template(name).render(csrf=self.sessions.csrf(s), reviewer=s.reviewer,
                                                  personal=s.personal, lead=self.may_lead(s), run=self.run,
                                                  folder=self.run.folder.name or str(self.run.folder),
                                                  request=request, t=t, js_texts=texts, **ctx)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def refused(self, status: int = 403, why: str = "link") -> HTMLResponse:
        html = self.env.get_template("refused.html.j2").render(t=self.t, why=why)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def enter(self, request: Request, s: Session, param: str, path: str | None = None) -> Response:
        """The session's cookie set, and a redirect to the same page (or ``path``) without the secret in its
        address."""
        rest = {k: v for k, v in request.query_params.items() if k != param}
        target = (path or request.url.path) + (f"?{urlencode(rest)}" if rest else "")
        resp = RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
        resp.set_cookie(self.cookie_name, s.id, httponly=True, samesite="strict", path="/")
        return resp

    def may_lead(self, s: Session) -> bool:
        """Whether the session sees the team's progress and adjudicates: an adjudicator's personal link, or
        the one user of a run without a team."""
        return s.role == "adjudicator" if s.personal else not self.run.team()

    def access_ok(self, s: Session) -> bool:
        """Whether a personal link's session still has access: its reviewer is in the team, with the key it was
        opened with (removing a reviewer or giving them a new key ends their open sessions at once)."""
        member = next((m for m in self.run.team() if m.name == s.reviewer), None)
        return member is not None and member.key_hash == s.key_hash and member.role == s.role

    def session_of(self, request: Request) -> Session | None:
        return self.sessions.get(request.cookies.get(self.cookie_name))

    def post_guard(self, request: Request, s: Session | None, token: str | None) -> Response | None:
        """403 unless the POST is same-origin and carries this session's CSRF token."""
        t = self.t
        if s is None:
            return JSONResponse({"error": t("err_no_session")}, 403, headers=SECURITY_HEADERS)
        origin = request.headers.get("origin")
        if origin is not None:
            own = urlsplit(str(request.url))
            if origin != f"{own.scheme}://{own.netloc}":
                return JSONResponse({"error": t("err_cross_site")}, 403, headers=SECURITY_HEADERS)
        if request.headers.get("sec-fetch-site") not in (None, "same-origin", "none"):
            return JSONResponse({"error": t("err_cross_site")}, 403, headers=SECURITY_HEADERS)
        if not self.sessions.csrf_ok(s, token):
            return JSONResponse({"error": t("err_csrf")}, 403, headers=SECURITY_HEADERS)
        return None

    def missing(self, request: Request, s: Session, rank: int, query: dict[str, str]) -> HTMLResponse:
        """404: no case at ``rank`` of the queue."""
        t = self.t
        return self.page("missing.html.j2", request, s, status=404,
                         why=t("missing_case", rank=rank, n=len(self.run.queue.cases)), query=query)


def review_of(request: Request) -> Review:
    """The app's :class:`Review` (set by :func:`create_app`)."""
    r: Review = request.app.state.review
    return r


Handler = Callable[[Request, Session], Awaitable[Response]]


def guarded(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A page: needs a session (the token URL or a personal link starts one; a session whose access ended is
    refused); asks for a name first."""

    async def endpoint(request: Request) -> Response:
        rv = review_of(request)
        s = rv.session_of(request)
        key = request.query_params.get("key")
        if key is not None:
            return personal_link(request, rv, s, key)
        token = request.query_params.get("token")
        if token is not None and rv.sessions.token_ok(token):
            if rv.run.team():
                return rv.refused(why="team")
            return rv.enter(request, s or rv.sessions.new(), "token")
        if s is None:
            return rv.refused(why="team" if rv.run.team() else "link")
        if rv.run.team() and not s.personal:
            return rv.refused(why="team")
        if s.personal and not rv.access_ok(s):
            return rv.refused(why="ended")
        if s.reviewer is None and request.url.path != "/reviewer":
            return rv.page("reviewer.html.j2", request, s, next=str(request.url.path))
        return await handler(request, s)

    return endpoint


def personal_link(request: Request, rv: Review, s: Session | None, key: str) -> Response:
    """A team member's personal link: a session that labels as them, and only as them; an adjudicator's opens the
    team page (progress, what to adjudicate), as the docs say."""
    member = rv.run.reviewer_by_key(key)
    if member is None:
        return rv.refused()
    if s is None or s.reviewer != member.name or not s.personal or s.key_hash != member.key_hash:
        s = rv.sessions.new(member.name, member.role, member.key_hash)
    return rv.enter(request, s, "key", "/team" if member.role == "adjudicator" and request.url.path == "/" else None)


async def queue_page(request: Request, s: Session) -> Response:
    rv = review_of(request)
    run = rv.run
    assert s.reviewer is not None
    mine = run.assigned(s.reviewer)
    filters = Filters.from_query(request.query_params, "mine" if mine else "review")
    rows = run.rows(s.reviewer, filters)
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    try:
        at = min(max(1, int(request.query_params.get("page", "1"))), pages)
    except ValueError:
        at = 1
    return rv.page("queue.html.j2", request, s, rows=rows[(at - 1) * PAGE_SIZE:at * PAGE_SIZE], n_rows=len(rows),
                   page_no=at, pages=pages, filters=filters, queue=run.queue, n_spot=len(run.spot),
                   n_mine=len(mine), progress=run.progress(s.reviewer), shortcuts=SHORTCUTS_QUEUE,
                   dimensions=run.dimensions, judges=run.results.judges, query=filters.query())


async def case_page(request: Request, s: Session) -> Response:
    rv = review_of(request)
    assert s.reviewer is not None
    rank = request.path_params["rank"]
    filters = Filters.from_query(request.query_params)
    try:
        view = rv.run.case_view(s.reviewer, rank, session=s.tag)
    except ActionError:
        return rv.missing(request, s, rank, filters.query())
    prev, nxt = rv.run.neighbours(s.reviewer, rank, filters)
    return rv.page("case.html.j2", request, s, view=view, a=view.audit, prev=prev, next=nxt, query=filters.query(),
                   progress=rv.run.progress(s.reviewer), shortcuts=SHORTCUTS_CASE)


async def sheet(request: Request, s: Session) -> Response:
    rv = review_of(request)
    assert s.reviewer is not None
    name = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in s.reviewer)
    headers = {**SECURITY_HEADERS, "Content-Disposition":
               f"attachment; filename=\"adjudication-{name}.csv\"; filename*=UTF-8''adjudication-"
               f"{quote(s.reviewer)}.csv"}
    return Response(rv.run.sheet(s.reviewer, session=s.tag), media_type="text/csv; charset=utf-8", headers=headers)


async def static_file(request: Request) -> Response:
    name = request.url.path.rsplit("/", 1)[-1]
    return Response(review_of(request).static[name], media_type=STATIC[name],
                    headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"})


async def set_reviewer(request: Request) -> Response:
    rv = review_of(request)
    s = rv.session_of(request)
    form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
    refusal = rv.post_guard(request, s, request.headers.get("x-csrf-token") or form.get("csrf"))
    if refusal is not None:
        return refusal
    assert s is not None
    t = rv.t
    if s.personal or rv.run.team():
        return JSONResponse({"error": t("name_is_yours")}, 403, headers=SECURITY_HEADERS)
    try:
        s.reviewer = clean_reviewer(form.get("reviewer", ""))
    except ActionError as e:
        return rv.page("reviewer.html.j2", request, s, status=400, error=e.text(rv.t), next="/")
    target = form.get("next", "/")
    if not target.startswith("/") or target.startswith("//"):
        target = "/"
    return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)


async def label(request: Request) -> Response:
    """The label endpoint: one action of the page (JSON), stored at once; what the page needs back."""
    rv = review_of(request)
    t = rv.t
    s = rv.session_of(request)
    refusal = rv.post_guard(request, s, request.headers.get("x-csrf-token"))
    if refusal is not None:
        return refusal
    assert s is not None
    if s.reviewer is None:
        return JSONResponse({"error": t("err_no_reviewer")}, 400, headers=SECURITY_HEADERS)
    if not s.personal and rv.run.team():
        return JSONResponse({"error": t("team_link")}, 403, headers=SECURITY_HEADERS)
    if s.personal and not rv.access_ok(s):
        return JSONResponse({"error": t("err_access_ended"), "ended": True}, 403, headers=SECURITY_HEADERS)
    try:   # the readers' JSON: nesting over 100 deep or a lone surrogate refused (a 400, never a 500)
        action = loads_json((await request.body()).decode("utf-8"))
    except ValueError:   # not UTF-8, not JSON, or refused (RefusedJSON is a JSONDecodeError)
        return JSONResponse({"error": t("err_not_json")}, 400, headers=SECURITY_HEADERS)
    if not isinstance(action, dict):
        return JSONResponse({"error": t("err_not_object")}, 400, headers=SECURITY_HEADERS)
    try:
        reply = rv.run.apply(s.reviewer, action, session=s.tag, member_key=s.key_hash if s.personal else None)
    except AccessEnded:   # removed (or a new link) since the check above: the store refused it, nothing stored
        return JSONResponse({"error": t("err_access_ended"), "ended": True}, 403, headers=SECURITY_HEADERS)
    except ActionConflict as e:   # a stale tab: both values back, for the reviewer to choose
        return JSONResponse({"error": e.text(t), "conflict": {"field": e.field, "version": e.version,
                                                              "stored": e.stored_value()}},
                            409, headers=SECURITY_HEADERS)
    except ActionError as e:
        return JSONResponse({"error": e.text(t)}, 400, headers=SECURITY_HEADERS)
    reply["progress"] = t("progress", done=reply["done"], total=reply["total"])
    return JSONResponse({"ok": True, **reply}, headers=SECURITY_HEADERS)


async def team_page(request: Request, s: Session) -> Response:
    rv = review_of(request)
    if not rv.may_lead(s):
        return rv.refused(why="lead")
    members, cases = rv.run.team_progress()
    return rv.page("team.html.j2", request, s, members=members, cases=cases)


async def adjudicate_page(request: Request, s: Session) -> Response:
    """The adjudication form of one case (GET), and the references it stores (POST: back to the team page, or the
    form again with the reason and what was entered)."""
    rv = review_of(request)
    run = rv.run
    assert s.reviewer is not None
    if not rv.may_lead(s):
        return rv.refused(why="lead")
    rank = request.path_params["rank"]
    error = None
    form: dict[str, str] | None = None
    if request.method == "POST":
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
        refusal = rv.post_guard(request, s, form.get("csrf"))
        if refusal is not None:
            return refusal
        try:
            run.adjudicate(s.reviewer, rank, {k[6:]: v for k, v in form.items() if k.startswith("score_")},
                           {k: v for k, v in form.items() if k.startswith("verdict_")},
                           {k: v for k, v in form.items() if k.startswith("criterion_")},
                           action_id=form.get("action_id") or None, session=s.tag,
                           member_key=s.key_hash if s.personal else None)
            return RedirectResponse("/team", status_code=303, headers=SECURITY_HEADERS)
        except AccessEnded:
            return rv.refused(why="ended")
        except ActionError as e:
            error = e.text(rv.t)
    try:
        dims = run.adjudication_view(rank)
    except ActionError:
        return rv.missing(request, s, rank, {})
    conflicts = run.verdict_conflicts(rank)
    crit_conflicts = run.criterion_conflicts(rank)
    names = list(dict.fromkeys([*(n for d in dims for n in d.scores), *(n for c in conflicts for n in c.verdicts),
                                *(n for c in crit_conflicts for n in c.verdicts)]))
    blind = run.adjudication_blind(rank)
    if blind:   # a spot-check case: the reviewers' blind scores only, until the reference is saved
        dims = [replace(d, panel=None) for d in dims]
    return rv.page("adjudicate.html.j2", request, s, status=400 if error else 200, a=run.case_at(rank), dims=dims,
                   blind=blind, action_id=(form or {}).get("action_id") or secrets.token_hex(12),
                   names=names, error=error, conflicts=conflicts, criterion_conflicts=crit_conflicts,
                   scores_needed=run.scores_needed(rank),
                   intro=adjudication_intro(rv.t, {d.view for d in run.results.rubric.dimensions}),
                   entries=adjudication_entries(dims, conflicts, crit_conflicts, form if error else None))


async def reviewer_page(request: Request, s: Session) -> Response:
    return review_of(request).page("reviewer.html.j2", request, s, next="/")


ROUTES = [
    Route("/", guarded(queue_page)),
    Route("/case/{rank:int}", guarded(case_page)),
    Route("/sheet.csv", guarded(sheet)),
    Route("/reviewer", guarded(reviewer_page), methods=["GET"]),
    Route("/team", guarded(team_page)),
    Route("/adjudicate/{rank:int}", guarded(adjudicate_page), methods=["GET", "POST"]),
    Route("/reviewer", set_reviewer, methods=["POST"]),
    Route("/api/label", label, methods=["POST"]),
    *(Route(f"/static/{name}", static_file) for name in STATIC),
]


def create_app(run: ReviewRun, *, reviewer: str | None = None, hosts: list[str] | None = None,
               cookie_name: str = "consensus_eval_review", lang: str | None = None) -> tuple[Starlette, Sessions]:
    """The app over ``run`` and its sessions (``sessions.token`` is what the printed URL carries).
    ``reviewer``: the name new sessions label as (else each browser is asked); ``hosts``: the Host
    names answered (default: loopback); ``lang``: ``zh`` or ``en`` (default: the report's rule, the
    rubric's language)."""
    sessions = Sessions(clean_reviewer(reviewer) if reviewer else None)
    t = messages(lang or default_lang(run.results.rubric))
    env = _env()
    # the audit's codes in the page's language, with the report's words (status, reasons, the ranking formula)
    rt = report_messages(t.lang)
    cfg = run.results.config.consensus
    env.globals.update(
        status_text=lambda code: rt("status_" + code) if "status_" + code in rt.texts else code,
        reason_texts=lambda a: review_reasons(a, rt, cfg.flag_star_gap),
        formula_text=rt(run.queue.formula_key),
        score_name=rt("col_risk" if run.queue.mode == "risk" else "col_disagreement"))
    static = {name: (files("consensus_eval.review") / "static" / name).read_bytes() for name in STATIC}
    assert set(REASON_CODES) <= {k[2:] for k in t.texts if k.startswith("r_")}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        run.close()

    allowed = hosts or LOOPBACK_HOSTS
    app = Starlette(routes=ROUTES, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed)],
                    lifespan=lifespan)
    app.state.review = Review(run, sessions, t, env, static, {k: t(k) for k in JS_KEYS}, cookie_name)
    return app, sessions


def serve(folder: str | Path, *, host: str = "127.0.0.1", port: int = 8765, reviewer: str | None = None,
          on_ready: Callable[[str], None] | None = None, lang: str | None = None) -> None:
    """Serve the review app over the run in ``folder`` until interrupted (Ctrl-C). ``on_ready`` gets
    the URL to open (with the access token) once the server listens. ``port`` 0 takes a free port.
    Raises :class:`InputError` when the run cannot be read or the address cannot be bound."""
    import socket

    import uvicorn

    from consensus_eval.review.model import open_run

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as e:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e}"
                         + (" (another program uses that port: give another --port)"
                            if e.errno == errno.EADDRINUSE else "")) from None
    try:
        run = open_run(folder)
    except BaseException:
        sock.close()
        raise
    port = sock.getsockname()[1]
    hosts = LOOPBACK_HOSTS if is_loopback(host) else ["*"]
    try:
        app, sessions = create_app(run, reviewer=reviewer, hosts=hosts, cookie_name=f"consensus_eval_review_{port}",
                                   lang=lang)
    except BaseException:
        sock.close()
        run.close()
        raise
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    url = f"http://{shown}:{port}/?token={sessions.token}"
    if on_ready is not None:
        original = server.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets)
            if server.started:
                on_ready(url)

        server.startup = startup  # type: ignore[method-assign]
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        if not server.started:
            run.close()
