"""The conversation's turns and who a clause is about.

Turns are ``医生/患者/家属:`` lines (or the case's role list, already rendered as such lines);
lines without a role join the turn before. A conversation with no role labels at all is read line by
line, questions and prescriptions taken as the doctor's. A clause with a kin word is about a
relative, except that in a family member's turn ``我爸``/``我女儿`` is the patient (``她外婆`` is a
relative). The patterns here (kin, other people, family questions, yes, unsure, hypothetical ...)
are what the conversation facts (``facts.py``) and drug mentions (``document.py``) are read with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from consensus_eval.judges.rules.medical_record.text import pieces

KIN = re.compile(r"父亲|母亲|爸爸|妈妈|老爸|老妈|父母|爸妈|哥哥|姐姐|弟弟|妹妹|兄弟|姐妹|爷爷|奶奶|外公|外婆|"
                 r"姥姥|姥爷|外祖父|外祖母|祖父|祖母|舅舅|姑姑|叔叔|伯伯|伯父|叔父|阿姨|姨妈|儿子|女儿|子女|孩子|"
                 r"家里人|家人|家族|亲属|亲戚|其父|其母|一级亲属|爸|妈|哥|姐|弟|妹")
OTHER_PERSON = re.compile(r"老伴|爱人|丈夫|妻子|老公|老婆|媳妇|同事|朋友|邻居|别人|人家|病友")
FAMILY_QUESTION = re.compile(r"家里|家人|家族|遗传|父母|爸妈|亲戚|兄弟姐妹|直系|亲属")
SELF_START = re.compile(r"^(?:我|本人|自己|俺)")
YES = re.compile(r"^(?:嗯|对|是的|是|有的|有|得过|查出|确诊|诊断过)")
UNSURE = re.compile(r"不知道|不清楚|不确定|记不清|不记得")
QUESTION_WORDS = re.compile(r"吗|么|呢|吧|多少|多久|多长|几|什么|怎么|怎样|哪|有没有|是不是|是否|还是")
NOT_STATED = re.compile(r"有没有|是否|是不是|排除|预防|避免|防止|筛查|警惕|注意")
HYPOTHETICAL = re.compile(r"如果|要是|假如|万一|可能|考虑|以后|将来|会不会|能不能|是不是|要不要|建议")
TENTATIVE = re.compile(r"如果|要是|假如|万一|可能|以后|将来|会不会|能不能|要不要")  # 考虑 X is a diagnosis


@dataclass(frozen=True)
class Turn:
    role: str  # doctor | patient | family | unknown
    start: int
    end: int


_ROLE_LINE = re.compile(r"^[ \t]*(医生|大夫|医师|患者家属|患者|病人|家属|doctor|patient|family|D|P)[ \t]*:[ \t]*",
                        re.M | re.I)
_DOCTORISH = re.compile(r"\?|吗|给您|给你开|我给|建议您|您的")
_ROLES = {"医生": "doctor", "大夫": "doctor", "医师": "doctor", "doctor": "doctor", "d": "doctor",
          "患者": "patient", "病人": "patient", "patient": "patient", "p": "patient",
          "家属": "family", "患者家属": "family", "family": "family"}


def parse_turns(text: str) -> list[Turn]:
    """Split a conversation into turns at ``role:`` line starts; lines without a role join the turn."""
    turns: list[Turn] = []
    matches = list(_ROLE_LINE.finditer(text))
    if not matches:  # unlabelled lines: questions and prescriptions are taken as the doctor's
        return [Turn("doctor" if _DOCTORISH.search(text, a, b) else "unknown", a, b)
                for a, b in pieces(text, 0, len(text), re.compile(r"\n"))]
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        turns.append(Turn(_ROLES[m.group(1).lower()], m.end(), end))
    return turns


def about_relative(cl: str, role: str) -> bool | None:
    """True: the clause is about a relative of the patient; False: about the patient; None: not a clause
    about a relative at all (no kin word). In a family member's turn, 我爸/我女儿 is the patient."""
    m = KIN.search(cl)
    if not m:
        return None
    if role == "family":
        before = cl[max(0, m.start() - 1):m.start()]
        if before in ("我", "俺") or cl[m.start():m.end()] in ("女儿", "儿子", "孩子"):
            return False
        return True if before in ("他", "她", "其") else None
    return True
