"""Prompt rendering: one Jinja template per rubric dimension, in a sandboxed environment.

A template renders two messages separated by ``{{ message_break }}``: first the system message
(static: role, the rubric text for the dimension, the output contract), then the user message (the
case, fenced as untrusted data). The split is taken at the first break, which always lies in the
static part, so case text cannot forge one. Static text first and the case
last lets providers cache the shared prefix across cases. The rubric text comes from the rubric
data, so editing the rubric YAML edits the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from jinja2 import FileSystemLoader, StrictUndefined, Template, TemplateError, TemplateNotFound, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from consensus_eval._errors import InputError
from consensus_eval._resources import data_dir
from consensus_eval.domain.cases import Case
from consensus_eval.domain.rubric import Dimension, Rubric

MESSAGE_BREAK = "\x1e--- consensus-eval message break ---\x1e"
_FENCE = re.compile(r"<{2,}\s*/?\s*(BEGIN|END)[^>]*>{2,}", re.IGNORECASE)


def fence(text: str, label: str) -> str:
    """Wrap untrusted ``text`` between BEGIN/END markers it cannot forge.

    Marker-like sequences inside the text are defanged (``<<<`` -> ``‹‹‹``) so a case cannot close
    the fence early and smuggle instructions outside it.
    """
    clean = _FENCE.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), text)
    return f"<<<BEGIN {label}>>>\n{clean}\n<<<END {label}>>>"


def inline(text: str) -> str:
    """Untrusted text shown outside a fence (a case id): one line, markers defanged."""
    one_line = " ".join(str(text).split())
    defanged = _FENCE.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), one_line)
    return defanged.replace("【", "[").replace("】", "]")


@cache
def _environment(prompts_root: str) -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        loader=FileSystemLoader(prompts_root), undefined=StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, autoescape=False,
    )
    env.filters["fence"] = fence
    env.filters["inline"] = inline
    env.filters["num"] = lambda x: f"{x:g}" if isinstance(x, float) else str(x)
    return env


def prompts_root(override: str | Path | None = None) -> Path:
    return Path(override) if override else data_dir("prompts")


def blind(case: Case) -> Case:
    """The case as a template sees it: without the ``system`` that wrote the record, its ``source``
    conversation's id or its ``meta`` (planted defects, notes), so a judge scores every system's record
    blind (a template cannot name them)."""
    if case.system is None and case.source is None and not case.meta:
        return case
    return case.model_copy(update={"system": None, "source": None, "meta": {}})


def render(rubric: Rubric, dimension: Dimension, case: Case,
           prompts_dir: str | Path | None = None) -> list[dict[str, str]]:
    """Render the chat messages (system, user) for one case and dimension."""
    root = prompts_root(prompts_dir)
    name = f"{rubric.prompts or rubric.id}/{dimension.id}.j2"
    env = _environment(str(root))
    with _template_errors(root / name):
        template = _template(env, root, name, DIMENSION_TEMPLATES)
        text = template.render(rubric=rubric, dimension=dimension, case=blind(case), message_break=MESSAGE_BREAK)
    return _messages(text, root / name)


#: the template of one call per case (``call: per_case``), beside the dimension templates
PER_CASE_TEMPLATE = "per_case.j2"
#: what a missing dimension template means
DIMENSION_TEMPLATES = "one .j2 per rubric dimension"


def _template(env: SandboxedEnvironment, root: Path, name: str, why: str) -> Template:
    """The template ``name`` of ``root``; a missing one is an :class:`InputError` naming its path and ``why``
    it is needed (a template it includes that is missing stays Jinja's error, reported by _template_errors)."""
    try:
        return env.get_template(name)
    except TemplateNotFound as e:
        if e.name != name:
            raise
        raise InputError(f"{root / name}: prompt template not found ({why})") from None


def render_case(rubric: Rubric, case: Case, prompts_dir: str | Path | None = None) -> list[dict[str, str]]:
    """The chat messages (system, user) asking every dimension of ``rubric`` about ``case`` in one call
    (``call: per_case``): ``<rubric>/per_case.j2``, rendered with ``criteria``, each dimension's text
    from the ``criteria`` block of its own template (``<rubric>/<dimension>.j2``), so the two modes
    ask with the same words."""
    root = prompts_root(prompts_dir)
    folder = rubric.prompts or rubric.id
    env = _environment(str(root))
    criteria: dict[str, str] = {}
    for dim in rubric.dimensions:
        with _template_errors(root / folder / f"{dim.id}.j2"):
            template = _template(env, root, f"{folder}/{dim.id}.j2", DIMENSION_TEMPLATES)
            block = template.blocks.get("criteria")
            context = template.new_context({"rubric": rubric, "dimension": dim, "case": case,
                                            "message_break": MESSAGE_BREAK})
            criteria[dim.id] = "".join(block(context)) if block is not None else ""
    name = f"{folder}/{PER_CASE_TEMPLATE}"
    with _template_errors(root / name):
        template = _template(env, root, name, f"`call: per_case` asks every dimension of a case in one call with "
                                              f"{PER_CASE_TEMPLATE} beside the dimension templates")
        text = template.render(rubric=rubric, case=blind(case), criteria=criteria, message_break=MESSAGE_BREAK)
    return _messages(text, root / name)


@contextmanager
def _template_errors(path: Path) -> Iterator[None]:
    """Any error loading or rendering the template ``path`` (a user's ``prompts_dir``: a syntax error, an undefined
    name, what the sandbox forbids, a template it includes that is missing, a division by zero...) as an
    :class:`InputError` naming the template file and line where it happened, and the error."""
    try:
        yield
    except InputError:
        raise
    except TemplateSyntaxError as e:
        where = e.filename or str(path)
        raise InputError(f"{where}: line {e.lineno}: the prompt template is not valid Jinja: {e.message}") from None
    except Exception as e:  # noqa: BLE001 - whatever a template raises while it renders is the template's error
        where, line = str(path), None
        tb = e.__traceback__
        while tb is not None:  # Jinja maps the frames of a template to its file and line: the last one is the place
            filename = tb.tb_frame.f_code.co_filename
            if filename.endswith(".j2") or Path(filename).parent == path.parent:
                where, line = filename, tb.tb_lineno
            tb = tb.tb_next
        what = e.message if isinstance(e, TemplateError) and e.message else str(e)
        at = f": line {line}" if line is not None else ""
        raise InputError(f"{where}{at}: the prompt template failed: {type(e).__name__}: {what}"[:2000]) from None


def _messages(text: str, where: Path) -> list[dict[str, str]]:
    if MESSAGE_BREAK not in text:
        raise InputError(f"{where}: the template must separate the system and user messages "
                         "with {{ message_break }}")
    system, user = text.split(MESSAGE_BREAK, 1)
    return [{"role": "system", "content": system.strip()}, {"role": "user", "content": user.strip()}]

