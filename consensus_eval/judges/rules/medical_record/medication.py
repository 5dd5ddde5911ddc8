"""How drugs are written in a text: names (generic, brand and short names), doses, frequency,
route and timing. Pure text reading; which mentions of a case count (negated, stopped, a relative's
...) is decided in ``document.py``.

Bare ``胰岛素`` is not a drug in ``胰岛素抵抗``, ``空腹胰岛素`` and the like; ``门冬`` is not insulin aspart in
``门冬氨酸钾镁``. The longest name is read: names written one after the other with nothing (or a salt: 钾, 酯)
between are one combination product (``厄贝沙坦氢氯噻嗪``, ``缬沙坦氨氯地平``, ``二甲双胍格列本脲``), whose dose and
frequency are its own, of the class of its first part. A dose is a number and a unit
(mg/g/μg/U/IU/单位/片/粒/支/ml); tablet counts and masses are kept apart (unit families) so a dose is compared only
with doses of its family.
Timing phrases (:data:`TIMING_PHRASES`: 睡前, 早餐前, 餐后, 随餐, 晚上 ...) each allow a set of (time of day, meal)
points; two writings of a drug's timing agree when their sets meet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from consensus_eval.judges.rules.medical_record.lexicon import BRAND_NAMES, DRUGS
from consensus_eval.judges.rules.medical_record.text import alternation, letter_bounded, to_number

_DRUG_NAMES = {**{g: g for g in DRUGS}, **BRAND_NAMES}
DRUG_RE = re.compile(alternation(_DRUG_NAMES))
_INSULIN_NOT_DRUG_AFTER = re.compile(r"抵抗|分泌|释放|水平|敏感|功能|自身抗体|抗体|瘤|泵|原|样|峰|曲线|指数|测定|促泌")
_INSULIN_NOT_DRUG_BEFORE = re.compile(r"(?:空腹|餐后|血清|血|内源性|胰岛|自身)$")
NEG_USE = re.compile(r"(?:否认|未曾|从未|从来没|未|没有|没|无|不|拒绝)(?:曾|再)?"
                     r"(?:使用|应用|服用|口服|注射|用过|用|服过|服|打过|打|吃过|吃|予|加用|接受)")
NEG_USE_AFTER = re.compile(r"[^,;。]{0,3}(?:没用过|没打过|没吃过|没用|不用|没有用|未用|未使用)")
STOPPED = re.compile(r"停用|停药|停掉|已停|停服|停了")
ONCE_USED = re.compile(r"曾(?:经)?(?:口服|服用|使用|用|注射|应用)?$")
TREATMENT_MODE = re.compile(r"^\s*(?:口服|皮下注射|注射|静脉)?\s*(?:等)?\s*(?:药物)?\s*治疗")
#: matches of NEG_USE are at most 6 characters long (从来没 + 曾 + a verb of 2), for GrowingSearch
NEG_USE_LONGEST = 6
#: taken out of the text after a drug before TREATMENT_MODE is tried (予二甲双胍、阿卡波糖片治疗)
NOT_USAGE = re.compile(DRUG_RE.pattern + r"|[、及和与]|片|胶囊")
_TREATMENT_MODE_CHARS = 9  # TREATMENT_MODE consumes at most 9 non-blank characters (皮下注射 等 药物 治疗)
CONNECTOR_ONLY = re.compile(r"^[^,;。]*?[、及和与/+]\s*$")
FORM_ORAL = re.compile(r"(?:钙|钠|钾|盐酸|酒石酸|琥珀酸)?(?:缓释|控释|肠溶|分散|咀嚼|口崩|泡腾)?(?:片|胶囊|颗粒|滴丸)")
FORM_INJECTION = re.compile(r"(?:注射液|注射笔|笔)")
# A number starts where its run of digits or numerals starts (see quantities.DURATION): no match of
# these ends in such a run, so nothing else is lost, and a long run is not rescanned from each digit.
DOSE = re.compile(r"(?P<num>(?<!\d)\d+(?:\.\d+)?|(?<![零一二两三四五六七八九十百半])[零一二两三四五六七八九十百半]+)\s*"
                  r"(?P<unit>mg|毫克|μg|ug|mcg|微克|IU|iu|U|u|个单位|单位|g|克|片|粒|支|袋|ml|mL|毫升)(?![A-Za-z])")
_DOSE_UNITS = {"mg": ("mass", 1.0), "毫克": ("mass", 1.0), "μg": ("mass", 0.001), "ug": ("mass", 0.001),
               "mcg": ("mass", 0.001), "微克": ("mass", 0.001), "g": ("mass", 1000.0), "克": ("mass", 1000.0),
               "IU": ("unit", 1.0), "iu": ("unit", 1.0), "U": ("unit", 1.0), "u": ("unit", 1.0),
               "个单位": ("unit", 1.0), "单位": ("unit", 1.0), "片": ("count", 1.0), "粒": ("count", 1.0),
               "支": ("count", 1.0), "袋": ("count", 1.0), "ml": ("volume", 1.0), "mL": ("volume", 1.0),
               "毫升": ("volume", 1.0)}
# a count of times, or a range of counts (2-3次, 两三次)
_COUNT = r"(?:\d+\s*(?:-|~|～|到|至)\s*)?\d+|[一两二三四五六]{1,2}"
FREQ = re.compile(rf"(?:每|一)\s*(?:日|天)[^\d一两二三四五六,;。]{{0,4}}?(?:{_COUNT})\s*(?:次|回|顿|针)|"
                  rf"(?:(?<!\d)(?:{_COUNT}))\s*次\s*/\s*(?:日|天|d)|"
                  r"(?<![A-Za-z.])(?:q\.?d|b\.?i\.?d|t\.?i\.?d|q\.?i\.?d|q\.?n|q\.?m|q\.?o\.?d|q\.?w|biw|prn|st|"
                  r"q\d+h)\.?(?![A-Za-z])|"
                  r"每晚|每早|每晨|睡前|睡觉前|早晚|早中晚|三餐前|三餐时|三餐后|餐前|餐后|餐时|随餐|饭前|饭后|每餐|每顿|"
                  r"早餐前|晚餐前|早餐后|晚餐后|午餐前|每周\s*(?:\d+|[一两二三])\s*次|"
                  r"晨起|晨服|早服|晚服|早上|晚上|中午|随第一口饭", re.I)
_FREQ_COUNT = re.compile(rf"(?:每|一)\s*(?:日|天)[^\d一两二三四五六,;。]{{0,4}}?"
                         rf"(?P<n>{_COUNT})\s*(?:次|回|针)|"
                         rf"(?P<n2>(?<!\d)(?:{_COUNT}))\s*次\s*/\s*(?:日|天|d)|"
                         r"(?<![A-Za-z.])(?P<abbr>q\.?d|b\.?i\.?d|t\.?i\.?d|q\.?i\.?d|q\.?n|q\.?m)\.?(?![A-Za-z])|"
                         r"(?P<word>早中晚|三餐前|三餐时|三餐后|早晚)", re.I)
_FREQ_WORDS = {"qd": 1, "bid": 2, "tid": 3, "qid": 4, "qn": 1, "qm": 1, "早中晚": 3, "三餐前": 3, "三餐时": 3,
               "三餐后": 3, "早晚": 2}
ROUTE = re.compile(r"口服|服用|服药|嚼服|嚼碎|含服|舌下|皮下注射|皮下|注射|静脉|静滴|静推|肌注|肌内注射|泵入|吸入|外用|"
                   r"(?<![A-Za-z.])(?:p\.?o|i\.?h|i\.?v|i\.?m)\.?(?![A-Za-z])", re.I)
# --- timing: when in the day a drug is taken, as the set of (time, meal) points a phrase allows
# times: 早 (morning), 午 (noon), 晚 (evening), 睡 (bedtime); meals: 前 (before), 后 (after), 随 (with), 无 (none)
_MEAL_TIMES = ("早", "午", "晚")
_ANY_MEAL = ("前", "后", "随", "无")


def _points(times: str, meals: str) -> frozenset[tuple[str, str]]:
    return frozenset((t, m) for t in times for m in meals)


_EVENING_OR_BED = _points("晚", "前后随无") | _points("睡", "无")
#: phrase -> the (time, meal) points it allows; a text's timing is the union over its phrases
TIMING_PHRASES: dict[str, frozenset[tuple[str, str]]] = {
    **dict.fromkeys(("睡前", "睡觉前", "临睡", "睡觉时", "就寝前"), _points("睡", "无")),
    **dict.fromkeys(("早餐前", "早饭前", "早晨饭前"), _points("早", "前")),
    **dict.fromkeys(("早餐后", "早饭后"), _points("早", "后")),
    **dict.fromkeys(("早餐时", "早饭时", "早餐中"), _points("早", "随")),
    **dict.fromkeys(("午餐前", "午饭前", "中饭前"), _points("午", "前")),
    **dict.fromkeys(("午餐后", "午饭后", "中饭后"), _points("午", "后")),
    **dict.fromkeys(("午餐时", "午饭时"), _points("午", "随")),
    **dict.fromkeys(("晚餐前", "晚饭前"), _points("晚", "前")),
    **dict.fromkeys(("晚餐后", "晚饭后"), _points("晚", "后")),
    **dict.fromkeys(("晚餐时", "晚饭时"), _points("晚", "随")),
    **dict.fromkeys(("早晚餐前", "早晚饭前"), _points("早晚", "前")),
    **dict.fromkeys(("早晚餐后", "早晚饭后"), _points("早晚", "后")),
    **dict.fromkeys(("三餐前", "每餐前", "每顿饭前", "饭前", "餐前", "进餐前", "吃饭前"), _points("早午晚", "前")),
    # right before a meal is also with it (餐前即刻: aspart and lispro are given either way)
    **dict.fromkeys(("餐前即刻", "餐前立即", "饭前马上", "吃饭前马上"), _points("早午晚", "前随")),
    **dict.fromkeys(("三餐后", "每餐后", "饭后", "餐后", "进餐后", "吃饭后", "吃完饭"), _points("早午晚", "后")),
    **dict.fromkeys(("随餐", "餐时", "餐中", "进餐时", "三餐时", "吃饭时", "吃饭的时候", "饭中", "第一口饭",
                     "和饭一起", "跟饭一起"), _points("早午晚", "随")),
    **dict.fromkeys(("早上", "早晨", "清晨", "晨起", "每早", "每晨", "早起", "晨服", "早服", "晨顿服", "qm", "QM",
                     "q.m.", "Q.M."),
                    _points("早", "前后随无")),
    "中午": _points("午", "前后随无"),
    **dict.fromkeys(("晚上", "每晚", "夜间", "晚间", "晚服", "夜服", "qn", "QN", "q.n.", "Q.N."), _EVENING_OR_BED),
    "早晚": _points("早晚", "前后随无") | _points("睡", "无"),
    **dict.fromkeys(("早中晚", "三餐", "每餐", "每顿"), _points("早午晚", "前后随无")),
}
TIMING = re.compile("|".join(letter_bounded(w) for w in sorted(TIMING_PHRASES, key=len, reverse=True)))


@dataclass(frozen=True)
class Dose:
    family: str
    value: float
    text: str


def drug_class(generic: str) -> str:
    """The class of a generic name, or of a combination's first part (厄贝沙坦氢氯噻嗪: ARB)."""
    got = DRUGS.get(generic)
    if got is None:
        first = DRUG_RE.match(generic)
        assert first is not None, generic  # a combination's generic is its parts' generics, in order
        got = DRUGS[_DRUG_NAMES[first.group()]]
    return got


@dataclass(frozen=True)
class DrugHit:
    start: int
    end: int
    surface: str
    generic: str  # a combination's: its parts' generic names, in order (厄贝沙坦氢氯噻嗪)
    nonstandard: bool
    parts: tuple[str, ...] = ()  # a combination's parts (generic names); () for one drug

    @property
    def cls(self) -> str:
        return drug_class(self.generic)

    @property
    def insulin(self) -> bool:
        return self.cls == "胰岛素"


#: what may stand between two parts of a combination's name (氯沙坦钾氢氯噻嗪, 奥美沙坦酯氢氯噻嗪)
_SALT = frozenset({"", "钾", "钠", "钙", "酯"})


def find_drugs(text: str, lo: int = 0, hi: int | None = None) -> list[DrugHit]:
    """The drug names of ``text[lo:hi]``, the longest name first: names written one after the other with
    nothing between (or a salt: 氯沙坦钾氢氯噻嗪) are one combination product (厄贝沙坦氢氯噻嗪, 缬沙坦氨氯地平,
    二甲双胍格列本脲, 西格列汀二甲双胍), not its first part followed by another drug."""
    out: list[DrugHit] = []
    for m in DRUG_RE.finditer(text, lo, len(text) if hi is None else hi):
        s = m.group()
        if s in BRAND_NAMES and len(s) == 2 and re.match(r"氨酸|冬|酸", text[m.end():m.end() + 2]):
            continue  # 门冬氨酸钾镁 is not insulin aspart
        if s == "胰岛素" and (_INSULIN_NOT_DRUG_AFTER.match(text, m.end())
                           or _INSULIN_NOT_DRUG_BEFORE.search(text, max(0, m.start() - 4), m.start())):
            continue
        hit = DrugHit(m.start(), m.end(), s, _DRUG_NAMES[s], s in BRAND_NAMES)
        prev = out[-1] if out else None
        if prev is not None and prev.end <= m.start() <= prev.end + 1 and text[prev.end:m.start()] in _SALT:
            parts = prev.parts or (prev.generic,)
            if hit.generic not in parts:
                out[-1] = DrugHit(prev.start, m.end(), text[prev.start:m.end()], "".join(parts) + hit.generic,
                                  prev.nonstandard or hit.nonstandard, (*parts, hit.generic))
                continue
        out.append(hit)
    return out


def doses(text: str) -> list[Dose]:
    out = []
    for m in DOSE.finditer(text):
        v = to_number(m.group("num"))
        if v is None:
            continue
        family, factor = _DOSE_UNITS[m.group("unit")]
        out.append(Dose(family, v * factor, m.group()))
    return out


def freq_counts(text: str) -> set[int]:
    out: set[int] = set()
    for m in _FREQ_COUNT.finditer(text):
        n = m.group("n") or m.group("n2")
        if n:
            ends = re.split(r"\s*(?:-|~|～|到|至)\s*", n)
            if len(ends) == 1 and len(n) == 2 and not n.isdigit():  # 两三次: 2 or 3
                ends = list(n)
            vs = [to_number(x) for x in ends]
            if all(vs) and len(vs) <= 2:
                lo, hi = int(vs[0] or 0), int(vs[-1] or 0)
                out.update(range(lo, hi + 1) if lo <= hi else (lo, hi))
        else:
            out.add(_FREQ_WORDS[(m.group("abbr") or m.group("word")).lower().replace(".", "")])
    return out


class _Key:
    """Text with blank runs made one space, cut after 10 other characters (see :func:`treatment_mode_after`)."""

    __slots__ = ("_blank", "_n", "_parts")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._n = 0
        self._blank = False

    def add(self, s: str) -> bool:
        """Append ``s``; True once the key is full."""
        for ch in s:
            if self._n > _TREATMENT_MODE_CHARS:
                return True
            if ch.isspace():  # what \s matches
                if not self._blank:
                    self._parts.append(" ")
                    self._blank = True
            else:
                self._parts.append(ch)
                self._blank = False
                self._n += 1
        return self._n > _TREATMENT_MODE_CHARS

    def text(self) -> str:
        return "".join(self._parts)


def treatment_mode_after(text: str, ends: list[int], stop: int) -> list[bool]:
    """For drug names ending at ``ends`` (in order) in one clause ending at ``stop``: whether the text after
    each, with :data:`NOT_USAGE` taken out, is a treatment-mode phrase, i.e.
    ``TREATMENT_MODE.match(NOT_USAGE.sub("", text[end:stop]))``, in time linear in the clause.

    Only a prefix decides: blanks matter only as runs (every blank in TREATMENT_MODE is ``\\s*``) and it
    consumes at most 9 other characters, so each mention gets a key, its text with ``NOT_USAGE`` out and
    blank runs made one space, cut after 10 other characters. ``NOT_USAGE`` has no lookaround: the
    removal scan from one end, once it stands at a later mention's end, goes on as that mention's own
    scan did; so the mentions are read from the last back, and a scan stops at the first later end it
    stands at (then that mention's key follows), at 10 characters, or at the clause end.
    """
    keys: dict[int, str] = {}
    out = [False] * len(ends)
    for i in range(len(ends) - 1, -1, -1):
        key = _Key()
        pos, j = ends[i], i + 1
        matches = NOT_USAGE.finditer(text, pos, stop)
        while True:
            m = next(matches, None)
            seg_end = stop if m is None else m.start()  # the scan stands at every position up to seg_end
            while j < len(ends) and ends[j] < pos:
                j += 1
            if j < len(ends) and ends[j] <= seg_end:
                key.add(text[pos:ends[j]])
                key.add(keys[ends[j]])
                break
            if key.add(text[pos:seg_end]) or m is None:
                break
            pos = m.end()
        keys[ends[i]] = key.text()
        out[i] = bool(TREATMENT_MODE.match(keys[ends[i]]))
    return out
