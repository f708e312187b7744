"""The detector's own rules, beside Presidio's recognizers and the policy's patterns.

One small class per rule: its settings (a section of ``policy.yaml``) and how it finds,
together.  Each reads a :class:`Scan` of the text; the detector runs them in order
(:mod:`assistant.privacy.detector`).
"""

from assistant.privacy.recognizers.common import Scan
from assistant.privacy.recognizers.lines import (
    ContactBlockRule,
    CuedNameRule,
    ForeignRunRule,
    FormFieldRule,
    LowercaseRule,
)
from assistant.privacy.recognizers.names import (
    GivenNameRule,
    NameListRule,
    PronounRule,
    ShortSurnameRule,
    SpeakerRule,
    ValuePartRule,
)
from assistant.privacy.recognizers.tokens import RareWordRule, VocativeRule, find_in_tokens

__all__ = [
    "ContactBlockRule",
    "CuedNameRule",
    "ForeignRunRule",
    "FormFieldRule",
    "GivenNameRule",
    "LowercaseRule",
    "NameListRule",
    "PronounRule",
    "RareWordRule",
    "Scan",
    "ShortSurnameRule",
    "SpeakerRule",
    "ValuePartRule",
    "VocativeRule",
    "find_in_tokens",
]
