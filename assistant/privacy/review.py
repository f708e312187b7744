"""Whether a sanitized question may leave: the review policy, the user's verdict at the
review, and text that nothing here could read.  The pipeline asks it before every upload,
and the privacy benchmark asks the same function (as ``drag ask --yes`` would)."""

from __future__ import annotations

from collections.abc import Callable

from assistant.base.errors import Declined, PrivacyError
from assistant.privacy.sanitize import Sanitized

# Shows the question and what would be sent; True sends it, False does not, a Sanitized
# sends that version (values the user chose to send as they are).
Review = Callable[[Sanitized], "bool | Sanitized"]


def needs_review(policy: str, sanitized: Sanitized) -> bool:
    found = bool(sanitized.findings or sanitized.unchecked)
    return policy == "always" or (policy == "on-detection" and found)


def _reviewed(shown: Sanitized, chosen: Sanitized) -> Sanitized:
    """The version the user approved: the same question, values released only from it."""
    detected = {r.value for r in (*shown.redacted.replacements, *shown.kept)}
    if chosen.original != shown.original or not set(chosen.released) <= detected:
        raise PrivacyError("not sent: the reviewed question does not match the one asked")
    return chosen


def approved(sanitized: Sanitized, policy: str, review: Review | None) -> Sanitized:
    """The version of ``sanitized`` that may be sent under review ``policy`` (always |
    on-detection | never), asking ``review`` where the policy calls for it; raises
    PrivacyError (or Declined) when nothing may be sent."""
    if sanitized.unchecked and (policy == "never" or review is None):  # never sent blind
        if sanitized.reader_stopped:
            fix = "ask it in shorter parts, or "
        elif sanitized.unread and not sanitized.addressed:
            fix = "turn the reader on (drag config set privacy.reader on), or "
        else:
            fix = ""
        raise PrivacyError(
            f"not sent: {'; '.join(sanitized.unchecked)}; {fix}ask with a review "
            "(drag ask --review) and read it yourself"
        )
    if not needs_review(policy, sanitized):
        return sanitized
    if review is None:
        raise PrivacyError(
            f"this question needs your review before it is sent (privacy.review = {policy}), "
            'but there is no terminal to ask on: pass --yes, or set privacy.review = "never"'
        )
    verdict = review(sanitized)
    if verdict is False:
        raise Declined("not sent: you declined the upload")
    return _reviewed(sanitized, verdict) if isinstance(verdict, Sanitized) else sanitized
