"""Prompt rendering: one Jinja template per rubric dimension, in a sandboxed environment.

A template renders two messages separated by ``{{ message_break }}``: first the system message
(static: role, the rubric text for the dimension, the output contract), then the user message (the
case, fenced as untrusted data). The split is taken at the first break, which always lies in the
static part, so case text cannot forge one. Static text first and the case
last lets providers cache the shared prefix across cases. The rubric text comes from the rubric
data, so editing the rubric YAML edits the prompt.

**Bounded rendering** (docs/limits.md, 'Templates'; two nested ``range(100000)`` loops would hang a dry run).
A template (a user's ``prompts_dir`` is untrusted like a case) renders under a budget of work, not of
wall-clock time: at most :data:`MAX_STEPS` loop iterations (every ``for`` of the template, nested and recursive
ones together), at most :data:`MAX_MADE_CHARS` characters made by its operators, calls, filters and ``~``
joins (each result's length counted; a result that would be larger than :data:`MAX_VALUE_CHARS`, such as
``'x' * 2000000000`` or ``'x'.center(10**9)``, is refused before it is made), at most :data:`MAX_OUTPUT_CHARS`
characters written, and at most :data:`MAX_RENDER_CPU_S` seconds of CPU. Going over one is an
:class:`InputError` naming the template, the line and the limit. ``lipsum`` is not offered (it makes text
without bound).
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import (
    FileSystemLoader,
    StrictUndefined,
    Template,
    TemplateError,
    TemplateNotFound,
    TemplateRuntimeError,
    TemplateSyntaxError,
    nodes,
)
from jinja2.loaders import split_template_path
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

from consensus_eval._errors import ConsensusEvalError, InputError
from consensus_eval._resources import data_dir
from consensus_eval.domain.cases import Case
from consensus_eval.domain.fewshot import FewShotExample
from consensus_eval.domain.rubric import Dimension, Rubric
from consensus_eval.domain.textio import max_bytes

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


#: the most loop iterations one rendering of a template makes (all its loops together)
MAX_STEPS = 1_000_000
#: the most characters one value a template computes may hold (a string, a list's items)
MAX_VALUE_CHARS = 10_000_000
#: the most characters one rendering's operators, calls, filters and joins may make, all together
MAX_MADE_CHARS = 50_000_000
#: the most characters one rendering writes
MAX_OUTPUT_CHARS = 10_000_000
#: the most CPU seconds one rendering takes
MAX_RENDER_CPU_S = 20.0
#: the largest whole number a template may pass to a function or filter (a width, a count)
MAX_CALL_INT = 1_000_000
#: the largest whole number (in bits) a template's arithmetic may make
_MAX_INT_BITS = 100_000


class TemplateLimit(ConsensusEvalError, TemplateRuntimeError):
    """A template went over one of its rendering limits (module docstring)."""


class _Budget:
    """What one rendering has used of its limits."""

    __slots__ = ("cpu", "made", "steps")

    def __init__(self) -> None:
        self.steps = 0
        self.made = 0
        self.cpu = time.process_time()

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TemplateLimit(f"over {MAX_STEPS:,} loop steps in one rendering (nested loops over large ranges?)")
        if not self.steps & 0xFFF:
            self.time()

    def time(self) -> None:
        if time.process_time() - self.cpu > MAX_RENDER_CPU_S:
            raise TemplateLimit(f"over {MAX_RENDER_CPU_S:g} s of CPU in one rendering")

    def made_of(self, value: Any) -> Any:
        size = _size(value)
        if size:
            if size > MAX_VALUE_CHARS:
                raise TemplateLimit(f"a value of {size:,} characters (the limit is {MAX_VALUE_CHARS:,})")
            self.made += size
            if self.made > MAX_MADE_CHARS:
                raise TemplateLimit(f"over {MAX_MADE_CHARS:,} characters made in one rendering")
        return value


_BUDGET: ContextVar[_Budget | None] = ContextVar("template_budget", default=None)


def _size(value: Any) -> int:
    """The length that counts against the budget: a string's, a list's, tuple's or dict's (else 0)."""
    return len(value) if isinstance(value, (str, list, tuple, dict)) else 0


def _budget() -> _Budget:
    """The current rendering's budget (a template rendered outside :func:`_rendering` gets a fresh one)."""
    budget = _BUDGET.get()
    if budget is None:
        budget = _Budget()
        _BUDGET.set(budget)
    return budget


@contextmanager
def _rendering() -> Iterator[_Budget]:
    """A fresh budget for the body (one rendering)."""
    token = _BUDGET.set(_Budget())
    try:
        yield _budget()
    finally:
        _BUDGET.reset(token)


def _too_big(size: int, what: str) -> None:
    if size > MAX_VALUE_CHARS:
        raise TemplateLimit(f"{what} would make {size:,} characters (the limit is {MAX_VALUE_CHARS:,})")


_WIDTHS = re.compile(r"\d{7,}")


def _check_binop(op: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would be over a limit, before it is made."""
    if op == "*":
        for seq, n in ((left, right), (right, left)):
            if _size(seq) and isinstance(n, int):
                _too_big(_size(seq) * max(n, 0), "a repetition")
        if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > _MAX_INT_BITS:
            raise TemplateLimit(f"a product of over {_MAX_INT_BITS:,} bits")
    elif op == "+" and _size(left) and _size(right):
        _too_big(_size(left) + _size(right), "a concatenation")
    elif op == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
        if right * abs(left).bit_length() > _MAX_INT_BITS:
            raise TemplateLimit(f"a power of over {_MAX_INT_BITS:,} bits")
    elif op == "%" and isinstance(left, str):
        stars = right if isinstance(right, tuple) else (right,) if "*" in left else ()
        if any(int(m) > MAX_CALL_INT for m in _WIDTHS.findall(left)) or any(
                isinstance(a, int) and abs(a) > MAX_CALL_INT for a in stars):
            raise TemplateLimit(f"a format width over {MAX_CALL_INT:,}")


def _check_args(name: str, args: Iterable[Any]) -> None:
    for a in args:
        if isinstance(a, int) and not isinstance(a, bool) and abs(a) > MAX_CALL_INT:
            raise TemplateLimit(f"{name} given {a:,} (numbers passed to a call or filter are at most "
                                f"{MAX_CALL_INT:,})")


def _check_format(name: str, spec: Any) -> None:
    """A format string (``str.format``, the ``format`` filter) whose widths are over :data:`MAX_CALL_INT`."""
    if isinstance(spec, str) and any(int(m) > MAX_CALL_INT for m in _WIDTHS.findall(spec)):
        raise TemplateLimit(f"{name} given a format width over {MAX_CALL_INT:,}")


def _joined_size(what: str, items: Any, separator: Any) -> Any:
    """``items`` (made a list when it is not one: a generator is read once) checked for a join with ``separator``:
    the result's length is known before it is made."""
    if not isinstance(items, (list, tuple, str, dict)):
        items = list(items)
    if isinstance(separator, str) and items:
        _too_big(len(separator) * (len(items) - 1) + sum(_size(i) if isinstance(i, str) else 1 for i in items), what)
    return items


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """The filter ``fn`` with its numbers checked and its result counted against the budget."""
    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        what = f"the filter {name}"
        if name == "join":   # do_join(eval_ctx, value, d="", attribute=None)
            args = (args[0], _joined_size(what, args[1], args[2] if len(args) > 2 else kwargs.get("d", "")),
                    *args[2:])
        _check_args(what, (*args[1:], *kwargs.values()))
        if name == "format" and args:
            _check_format(what, args[-1] if not isinstance(args[0], str) else args[0])
        return _budget().made_of(fn(*args, **kwargs))
    return bounded


class _BoundedEnvironment(SandboxedEnvironment):
    """The sandbox with the limits of the module docstring: every ``for`` counts its steps, every operator,
    call, filter and ``~`` join is checked before and counted after."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.globals.pop("lipsum", None)

    def bound_filters(self) -> None:
        self.filters = {name: _bounded_filter(name, fn) for name, fn in self.filters.items()}

    def compile(self, source: Any, name: str | None = None, filename: str | None = None, raw: bool = False,
                defer_init: bool = False) -> Any:
        if isinstance(source, str):
            source = self.parse(source, name, filename)
        for loop in source.find_all(nodes.For):   # the steps of every loop counted (not shadowable by a name)
            loop.iter = nodes.Call(nodes.EnvironmentAttribute("counted_steps"), [loop.iter], [], None, None,
                                   lineno=loop.iter.lineno)
        for concat in list(source.find_all(nodes.Concat)):   # `a ~ b`: checked like `+`
            concat.nodes = [nodes.Call(nodes.EnvironmentAttribute("joined"), list(concat.nodes), [], None, None,
                                       lineno=concat.lineno)]
        return super().compile(source, name, filename, raw, defer_init)  # type: ignore[call-overload]

    def counted_steps(self, iterable: Any) -> Iterator[Any]:
        """``iterable``, each item a step of the budget."""
        budget = _budget()
        for item in iterable:
            budget.step()
            yield item

    def joined(self, *parts: Any) -> str:
        """``a ~ b ~ c``: the parts as text, joined, within the limits."""
        texts = [str(p) for p in parts]
        _too_big(sum(map(len, texts)), "a join (~)")
        joined = "".join(texts)
        _budget().made_of(joined)
        return joined

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``str.format`` / ``format_map`` as the sandbox wraps it, its widths checked first."""
        if getattr(value, "__name__", None) in ("format", "format_map"):
            _check_format(value.__name__, getattr(value, "__self__", None))
        return super().wrap_str_format(value)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return _budget().made_of(super().call_binop(context, operator, left, right))

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        target = getattr(__obj, "__self__", None)
        if target is __self:   # counted_steps, joined: their own checks
            return super().call(__context, __obj, *args, **kwargs)
        name = getattr(__obj, "__name__", "a function")
        _check_args(name, (*args, *kwargs.values()))
        target = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)   # a str method: its string
        if name == "join" and isinstance(target, str) and len(args) == 1:
            args = (_joined_size("a join", args[0], target),)
        if name == "replace" and isinstance(target, str) and len(args) >= 2 and isinstance(args[0], str) \
                and isinstance(args[1], str):
            hits = len(target) + 1 if not args[0] else target.count(args[0])
            _too_big(len(target) + hits * (len(args[1]) - len(args[0])), "a replace")
        budget = _budget()
        budget.time()
        return budget.made_of(super().call(__context, __obj, *args, **kwargs))


class _BoundedLoader(FileSystemLoader):
    """Jinja's file loader (regular files only: a device or a pipe is not found), refusing a template over the
    cap of a prompt template (:func:`~consensus_eval.domain.textio.max_bytes`) before it is read."""

    def get_source(self, environment: Any, template: str) -> tuple[str, str, Callable[[], bool]]:
        cap = max_bytes("prompt template")
        for searchpath in self.searchpath:
            filename = posixpath.join(searchpath, *split_template_path(template))
            if os.path.isfile(filename):
                if os.path.getsize(filename) > cap:
                    raise InputError(f"{filename}: the prompt template is larger than {cap // 1024**2} MiB, the most "
                                     "a template may be")
                break
        return super().get_source(environment, template)


@cache
def _environment(prompts_root: str) -> SandboxedEnvironment:
    env = _BoundedEnvironment(
        loader=_BoundedLoader(prompts_root), undefined=StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, autoescape=False,
    )
    env.filters["fence"] = fence
    env.filters["inline"] = inline
    env.filters["num"] = lambda x: f"{x:g}" if isinstance(x, float) else str(x)
    env.bound_filters()
    return env


def _written(chunks: Iterable[str]) -> str:
    """The chunks a template writes, joined, refused once over :data:`MAX_OUTPUT_CHARS`."""
    out: list[str] = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > MAX_OUTPUT_CHARS:
            raise TemplateLimit(f"over {MAX_OUTPUT_CHARS:,} characters written in one rendering")
        out.append(chunk)
    return "".join(out)


def prompts_root(override: str | Path | None = None) -> Path:
    return Path(override) if override else data_dir("prompts")


def blind(case: Case) -> Case:
    """The case as a template sees it: without the ``system`` that wrote the record, its ``source``
    conversation's id or its ``meta`` (planted defects, notes), so a judge scores every system's record
    blind (a template cannot name them)."""
    if case.system is None and case.source is None and not case.meta:
        return case
    return case.model_copy(update={"system": None, "source": None, "meta": {}})


def render(rubric: Rubric, dimension: Dimension, case: Case, prompts_dir: str | Path | None = None,
           examples: Sequence[FewShotExample] = ()) -> list[dict[str, str]]:
    """Render the chat messages (system, user) for one case and dimension. ``examples``: the dimension's few-shot
    examples (:mod:`consensus_eval.domain.fewshot`), the template's ``examples`` (a template that does not show
    them renders as without them)."""
    root = prompts_root(prompts_dir)
    name = f"{rubric.prompts or rubric.id}/{dimension.id}.j2"
    env = _environment(str(root))
    with _template_errors(root / name), _rendering():
        template = _template(env, root, name, DIMENSION_TEMPLATES)
        text = _written(template.generate(rubric=rubric, dimension=dimension, case=blind(case),
                                          message_break=MESSAGE_BREAK, examples=list(examples)))
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


def render_case(rubric: Rubric, case: Case, prompts_dir: str | Path | None = None,
                examples: Mapping[str, Sequence[FewShotExample]] | None = None) -> list[dict[str, str]]:
    """The chat messages (system, user) asking every dimension of ``rubric`` about ``case`` in one call
    (``call: per_case``): ``<rubric>/per_case.j2``, rendered with ``criteria``, each dimension's text
    from the ``criteria`` block of its own template (``<rubric>/<dimension>.j2``), so the two modes
    ask with the same words, and ``examples`` (dimension id -> its few-shot examples; each criteria block
    sees its own dimension's as ``examples``)."""
    shown = {d.id: list((examples or {}).get(d.id, ())) for d in rubric.dimensions}
    root = prompts_root(prompts_dir)
    folder = rubric.prompts or rubric.id
    env = _environment(str(root))
    criteria: dict[str, str] = {}
    for dim in rubric.dimensions:
        with _template_errors(root / folder / f"{dim.id}.j2"), _rendering():
            template = _template(env, root, f"{folder}/{dim.id}.j2", DIMENSION_TEMPLATES)
            block = template.blocks.get("criteria")
            context = template.new_context({"rubric": rubric, "dimension": dim, "case": case,
                                            "message_break": MESSAGE_BREAK, "examples": shown[dim.id]})
            criteria[dim.id] = _written(block(context)) if block is not None else ""
    name = f"{folder}/{PER_CASE_TEMPLATE}"
    with _template_errors(root / name), _rendering():
        template = _template(env, root, name, f"`call: per_case` asks every dimension of a case in one call with "
                                              f"{PER_CASE_TEMPLATE} beside the dimension templates")
        text = _written(template.generate(rubric=rubric, case=blind(case), criteria=criteria,
                                          message_break=MESSAGE_BREAK, examples=shown))
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

