"""Words in a question that speak to the privacy reader rather than ask the teacher.

The question is data to the local reader (:mod:`assistant.privacy.reader`), never
instructions; where such words stand, an empty or short reading proves nothing, so it
lifts no protection (:mod:`assistant.privacy.sanitize`).  Found by patterns: what they
do not catch, the reader's fence and system turn must hold.
"""

from __future__ import annotations

import re

# Text that speaks to the privacy reader rather than asks the teacher: the reply's own
# schema, a claim that nothing in it is personal or real, an order about listing or
# about earlier instructions.  Where one stands, an empty or short reading proves
# nothing, so it lifts no protection (assistant.privacy.sanitize).  A few languages;
# the JSON signs hold in any.
_NOT_REAL = r"(?:fictional|fictitious|made[- ]up|fake|invented|imaginary|not real)"
_NOT_PERSONAL = "a claim that nothing in it is personal or real"
# (what the refusal calls it, the pattern): the refusal names the kind, never the
# words matched (they may hold a value).
_ADDRESSED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern, re.IGNORECASE))
    for label, pattern in (
        ("a reply in the privacy reader's own JSON form", r'"found"\s*:|\{\s*"found"'),
        (
            _NOT_PERSONAL,
            r"\b(?:no|not|none|nothing|without|zero)\b[^.\n]{0,30}\bpersonal\s+values?\b",
        ),
        (
            _NOT_PERSONAL,
            r"\b(?:no|not|none|nothing|zero)\b[^.\n]{0,30}\b(?:personal|private|sensitive|"
            r"identifying)\b[^.\n]{0,30}"
            r"\b(?:here|in (?:this|it|the (?:text|message|question|note)))\b",
        ),
        (
            _NOT_PERSONAL,
            rf"\b(?:names?|people|persons?|values?|everyone|everybody)\b[^.\n]{{0,30}}\b(?:are|is)"
            rf"\s+(?:all\s+)?{_NOT_REAL}\b|\b{_NOT_REAL}\s+names?\b",
        ),
        (
            "an order to ignore instructions",
            r"\bignore\s+(?:all\s+|any\s+)?(?:the\s+|your\s+|my\s+)?(?:previous|above|prior|"
            r"earlier|system|former)\s+(?:instructions?|rules?|prompts?|messages?|conversations?)\b"
            r"|\bignore\s+(?:all\s+|your\s+)?(?:instructions|rules)\b",
        ),
        (
            "words addressed to a privacy checker",
            r"\b(?:note|message|instructions?|dear|hey|attention)\s+(?:to|for)?\s*(?:the\s+)?"
            r"(?:privacy|pii|redaction|personal[- ]data)\s+(?:reader|filter|checker|check|"
            r"scanner|model|detector|tool)\b|\b(?:privacy|pii)\s+(?:reader|checker|filter)\s*:",
        ),
        (
            "an order not to list or hide values",
            r"\b(?:do not|don'?t|never)\s+(?:list|redact|mask|flag|hide)\s+(?:any\s+|the\s+|"
            r"these\s+|this\s+|my\s+)?(?:names?|values?|people|persons?|personal)\b",
        ),
        (
            _NOT_PERSONAL,
            r"虚构|假名|假的名字|没有(?:任何)?个人|不含(?:任何)?个人|无个人信息|"
            r"架空の|個人情報(?:は|が)?(?:ありません|含まれていません|なし)|"
            r"вымышлен|выдуман|нет (?:никаких )?(?:личных|персональных)|"
            r"\bficti(?:cio|f|ve)|\bfiktiv|\bno hay datos personales|\bkeine personenbezogenen|"
            r"\baucune donn[ée]e personnelle",
        ),
        (
            "an order to ignore instructions",
            r"忽略(?:以上|上面|之前|前面)?的?(?:指令|说明|规则)|不要列出|隐私(?:检查|过滤|读取)|指示を無視",
        ),
    )
)


def addressed(text: str) -> str:
    """What kind of words in ``text`` speak to the privacy reader (see
    :data:`_ADDRESSED`): a description, never the words themselves; "" when none."""
    for label, pattern in _ADDRESSED:
        if pattern.search(text) is not None:
            return label
    return ""
