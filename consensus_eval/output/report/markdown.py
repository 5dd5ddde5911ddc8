"""report.md: the report as Markdown tables, readable as plain text and in any Markdown viewer.

Text from cases and judges goes through :func:`md_text`: HTML special characters become entities
(so a Markdown viewer that renders inline HTML shows ``<script>`` as text) and Markdown syntax
characters are backslash-escaped, so a quote cannot break a table or inject a link.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from consensus_eval.analysis.audit import CaseAudit, DimensionAudit
from consensus_eval.analysis.human import CaseReview
from consensus_eval.domain.kinds.base import VIEW_DEDUCTIONS, VIEW_LEVELS
from consensus_eval.output.report import fmt
from consensus_eval.output.report.blocks import Block, Cases, Cell, Group, Heading, Msg, Para, Part, TableBlock, shown
from consensus_eval.output.report.data import (
    ReportData,
)
from consensus_eval.output.report.i18n import Messages
from consensus_eval.output.report.section_list import header_block, report_blocks

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def md_text(s: object) -> str:
    """Any value as inline Markdown text: one line, HTML and Markdown syntax escaped (in C: a 10 MB quote
    costs its own size, not a list of one string per character)."""
    text = " ".join(str(s).split()).translate(_HTML)
    return _MD_SPECIAL.sub(r"\\\1", text)


def table(header: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    """A Markdown table; cells must already be escaped text. ``right`` marks right-aligned columns."""
    right = right or [False] * len(header)
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(data: ReportData) -> str:
    """The whole report as Markdown: the first screen, then every section of the report's list
    (:data:`~consensus_eval.output.report.section_list.SECTIONS`) report.md shows."""
    blocks = [b for _, got in report_blocks(data, "md") for b in got]
    parts = [block_markdown(header_block(data), 1), *(block_markdown(b) for b in blocks)]
    return "\n\n".join(p for p in parts if p) + "\n"


def block_markdown(b: Block | None, level: int = 2) -> str:
    """A section (:class:`~consensus_eval.output.report.blocks.Block`) as Markdown ("" for None)."""
    if b is None:
        return ""
    return "\n\n".join([f"{'#' * level} {md_of(b.title)}", *parts_markdown(b.content())])


def parts_markdown(parts: Sequence[Part]) -> list[str]:
    """Each part report.md shows, as Markdown ("" parts left out)."""
    out: list[str] = []
    for p in shown(list(parts), "md"):
        text = _part(p)
        if text and isinstance(p, Para) and p.attached and out:
            out[-1] += f"\n{text}\n"
        elif text:
            out.append(text)
    return out


def _part(p: Part) -> str:
    if isinstance(p, Para):
        return f"**{md_of(p.text)}**" if p.kind in ("warn", "banner") else md_of(p.text)
    if isinstance(p, Heading):
        return f"{'#' * p.level} {md_of(p.text)}"
    if isinstance(p, TableBlock):
        if not p.rows:
            return ""
        cols = p.shown("md")
        right = [bool(p.right) and p.right[i] for i in cols] if p.right else None
        return table([md_of(p.header[i]) for i in cols], ([_cell(row[i]) for i in cols] for row in p.rows), right)
    if isinstance(p, Cases):
        return "\n\n".join(_case_details(a, p.data) for a in p.items) if p.kind == "details" else ""  # type: ignore[arg-type]
    if isinstance(p, Group):
        inner = parts_markdown(p.parts)
        return "\n\n".join([f"### {md_of(p.summary)}", *inner] if p.summary else inner)
    return ""


def _cell(c: str) -> str:
    if isinstance(c, Cell):
        return " ".join(x for x in (md_of(c.text), *(md_of(s) for _, s in c.spans)) if x)
    return md_of(c)


def md_of(x: object) -> str:
    """A text of a block as Markdown: data escaped (:func:`md_text`); the package's own text (a
    :class:`~consensus_eval.output.report.blocks.Msg`) as written, its values escaped."""
    if isinstance(x, Msg):
        return x.template.format(**{k: md_of(v) for k, v in x.values.items()}) if x.values else x.template
    return md_text(x)


def _case_details(a: CaseAudit, d: ReportData) -> str:
    t = d.t
    lines = [f"### #{a.rank} {md_text(a.case_id)} ({t('status_' + a.status)}, "
             f"{t('col_risk') if d.single_judge else t('col_disagreement')} {fmt.mean1(a.score(d.review_queue.mode))})"]
    if a.flags:
        lines.append(f"\n{t('col_flags')}: {md_text('; '.join(d.flag_texts(a.case_id)))}")
    review = d.human_of(a.case_id)
    if review is not None and "total" in review.human:
        said = t("md_human_vs_panel", human=fmt.num(review.human["total"]), whose=_whose(t, review, "total"),
                 panel=fmt.num(a.total))
        lines.append(f"\n{md_text(said)}")
    if a.status == "failed":
        lines.append("\n" + t("md_no_judge") + " " + " · ".join(f"{md_text(j)}: {md_text('; '.join(es))}"
                                                           for j, es in a.errors_by_judge().items()))
    else:
        for dim in a.dimensions:
            human = review.human.get(dim.dimension) if review else None
            lines.extend(_dimension_lines(dim, t, human, review) if dim.view == VIEW_DEDUCTIONS else
                         _kind_lines(dim, t, human, review, d.judges))
    if a.mismatch_runs:
        lines.append(f"\n{t('claimed_vs_derived')}:")
        lines += ["- " + t("mismatch" if m.derived_stars is not None else "mismatch_no_stars", judge=md_text(m.judge),
                           run=m.run + 1, dim=md_text(m.dimension_name), claimed=fmt.num(m.claimed_score),
                           cstars=m.claimed_stars if m.claimed_stars is not None else fmt.DASH,
                           derived=fmt.num(m.derived_score), dstars=m.derived_stars)
                  for m in a.mismatch_runs]     # in the report's language (a zh report had "run", "claimed")
    return "\n".join(lines)


def _whose(t: Messages, review: CaseReview, key: str) -> str:
    """Whose human score the report shows for ``key`` (the adjudicator's reference, a reviewer's own, a mean)."""
    kind, names = review.whose(key)
    return t("human_whose_" + kind, names=t("name_sep").join(names))


def _human_sub(t: Messages, human: float | None, review: CaseReview | None, dim: DimensionAudit) -> str:
    """``, human 30 (whose)`` after a dimension's panel score, and each blind score revised after the reveal."""
    if human is None or review is None:
        return ""
    out = f", {t('human_dim', value=fmt.num(human), whose=_whose(t, review, dim.dimension))}"
    for name, revised in review.revisions.items():
        if dim.dimension in revised and dim.dimension in review.scores.get(name, {}):
            out += "; " + t("human_revised", name=name, dim=dim.name, blind=fmt.num(review.scores[name][dim.dimension]),
                            value=fmt.num(revised[dim.dimension]))
    return out


def _dimension_lines(dim: DimensionAudit, t: Messages, human: float | None = None,
                     review: CaseReview | None = None) -> list[str]:
    if dim.quiet:
        return [f"\n{md_text(dim.name)}: {t('quiet')}"]
    sub = t("md_dim_sub", panel=fmt.num(dim.panel_score), gap=dim.star_gap) + md_text(_human_sub(t, human, review, dim))
    lines = [f"\n{md_text(dim.name)} ({sub}):\n"]
    for v in dim.judges:
        head = f"- {md_text(v.judge)}: {fmt.num(v.score)} ({fmt.stars(v.stars)})"
        if not v.runs_ok:
            lines.append(f"{head}: {t('failed')} ({md_text('; '.join(v.errors))})")
            continue
        lines.append(head + ("" if v.deductions else f": {t('no_deduction')}"))
        for g in v.drill_down():
            indent = "  "
            if g.n_runs > 1:
                lines.append(f"  - *{md_text(_runs_label(g.runs, g.n_runs, t))}*")
                indent = "    "
            for it in g.items:
                x = it.deduction
                quote = f" «{md_text(x.evidence)}»" if x.evidence else ""
                category = t("fixed_penalty") if x.kind == "penalty" else x.category
                item = f"{md_text(category)} / {md_text(x.type)} −{fmt.num(x.points)}"
                note = f" **[{t('singleton')}]**" if x.match == "none" else \
                    f" [{t('same_category')}]" if x.match == "category" else ""
                if it.applied_once:
                    note += f" [{t('applied_once')}]"
                elif it.times_listed > 1:
                    note += f" [×{it.times_listed}]"
                if x.grounding is not None and x.grounding.kind == "not_found":
                    note += f" **[{t('not_found')}]**"
                lines.append(f"{indent}- {item}{note}{quote}")
    return lines


def _kind_lines(dim: DimensionAudit, t: Messages, human: float | None, review: CaseReview | None,
               judges: Sequence[str]) -> list[str]:
    """A likert dimension's drill-down (each judge's level per run with its anchor and evidence) or a criteria
    dimension's (criterion by criterion, each judge's verdict, the reviewers' own)."""
    if dim.quiet:
        return [f"\n{md_text(dim.name)}: {t('quiet_kinds')}"]
    if dim.view == VIEW_LEVELS:
        sub = t("md_dim_sub_likert", panel=fmt.num(dim.panel_score), spread=fmt.num(dim.level_spread))
    else:
        sub = t("md_dim_sub_criteria", panel=fmt.num(dim.panel_score), split=len(dim.split_criteria),
                n=len(dim.criteria))
    sub += md_text(_human_sub(t, human, review, dim))
    lines = [f"\n{md_text(dim.name)} ({sub}):\n"]
    if dim.view == VIEW_LEVELS:
        for v in dim.judges:
            head = f"- {md_text(v.judge)}: {fmt.num(v.score)}" + (f" ({fmt.stars(v.stars)})" if v.stars else "")
            if not v.runs_ok:
                lines.append(f"{head}: {t('failed')} ({md_text('; '.join(v.errors))})")
                continue
            lines.append(head)
            for r in v.ratings:
                run = f"*{md_text(_runs_label([r.run], v.n_runs, t))}* " if v.n_runs > 1 else ""
                quotes = "".join(f" «{md_text(q)}»" for q in r.evidence)
                lines.append(f"  - {run}{md_text(t('level', level=r.rating, anchor=r.anchor))}{quotes}")
        return lines
    mine = {rv: given.get(dim.dimension, {}) for rv, given in review.criteria.items()} if review else {}
    for row in dim.criteria:
        said = []
        for j in judges:
            votes = row.judges.get(j)
            if votes:
                said.append(f"{md_text(j)} " + "/".join(t("met") if m else t("not_met") for m in votes))
        said += [f"{md_text(rv)} {t('met') if given[row.id] else t('not_met')}"
                 for rv, given in mine.items() if row.id in given]
        note = f" **[{t('split')}]**" if row.split else ""
        lines.append(f"- {md_text(row.id)}: {md_text(row.text)} ({fmt.num(row.points)}){note}: " + "; ".join(said))
    return lines


def _runs_label(runs: Sequence[int], n_runs: int, t: Messages) -> str:
    """A group of runs in readers' numbering (from 1), in the report's language."""
    if len(runs) == n_runs:
        return t("x_runs", n=n_runs)
    key = "run_of" if len(runs) == 1 else "runs_of"
    return t(key, r=", ".join(str(r + 1) for r in runs), n=n_runs)
