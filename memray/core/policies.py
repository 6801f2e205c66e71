"""What must not be stored, and how long what is stored lives.

- PII (Chinese ID numbers, phone numbers, e-mail, bank cards, street addresses) is never
  stored: facts carrying it are dropped, logged turns and verbatim messages are redacted.
  Log lines name only the kind of PII, never the text.
- Consent: 0 keep nothing, 1 this session only (in process), 2 persistent.
- Probation: inferred or low-confidence facts enter as candidates, recalled only once a
  later mention confirms them; unconfirmed they retire after 30 days.
- Lifetimes by type: identity and constraints permanent; task state expires after 7 days;
  preferences decay in ranking after 90 days (see RecallConfig.half_life_days).
- Length: one fact is at most about 50 CJK or 200 Latin characters; a longer one is cut to
  its leading clauses (its core), not dropped.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import datetime, timedelta

from memray.extract.base import Fact
from memray.hanzi import simplified
from memray.models import MemorySource, MemoryStatus, MemoryType

log = logging.getLogger(__name__)

_PII: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("email", re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    ("cn_id", re.compile(r"(?<!\d)\d{17}[\dXx](?![\dXx])")),
    ("phone", re.compile(r"(?<!\d)(?:\+?86[ -]?)?1[3-9]\d[ -]?\d{4}[ -]?\d{4}(?!\d)|"
                         r"(?<![\d+])\+\d{1,3}[ -]?\(?\d{1,4}\)?(?:[ -]?\d{2,4}){2,4}(?!\d)|"
                         r"(?<!\d)\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}(?!\d)")),
    ("bank_card", re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")),
    ("street_address", re.compile(
        r"\b\d{1,6}\s+(?:[A-Z][\w.]*\s+){1,4}(?:Street|St|Road|Rd|Avenue|Ave|Lane|Ln|"
        r"Boulevard|Blvd|Drive|Dr|Court|Ct|Way|Place|Pl)\b\.?|"
        r"[\u4e00-\u9fff]{1,12}(?:路|街|大道|巷|弄|胡同)\d+(?:号|弄|栋|幢)|"
        r"\d+(?:栋|幢|号楼)\d*(?:单元)?\d*(?:室|号)?|小区\S{0,6}\d+(?:栋|幢|号楼|室)")),
)
REDACTED = re.compile(r"\[redacted:[a-z_]+\]")


def _luhn(digits: str) -> bool:
    total, alt = 0, False
    for ch in reversed(digits):
        d = int(ch)
        if alt:
            d = d * 2 - 9 if d > 4 else d * 2
        total, alt = total + d, not alt
    return total % 10 == 0


# A long number the user calls a card or account number is one even when its checksum
# fails (a typo, a test number): the checksum only keeps other long numbers.
_CARD_WORDS = re.compile(r"(?:卡号|银行卡|信用卡|储蓄卡|借记卡|账号|账户|\bcard\b|"
                         r"\baccount (?:number|no)\b|\biban\b)[^\d]{0,12}$", re.I)


def _card(m: re.Match[str]) -> bool:
    return _luhn(re.sub(r"\D", "", m.group())) or bool(
        _CARD_WORDS.search(m.string[max(0, m.start() - 24):m.start()]))


def pii_kinds(text: str) -> list[str]:
    """The kinds of PII found in `text` (a bank card passes the Luhn check or is called
    one)."""
    kinds, read = [], simplified(text)
    for kind, pattern in _PII:
        for m in pattern.finditer(read):
            if kind == "bank_card" and not _card(m):
                continue
            kinds.append(kind)
            break
    if REDACTED.search(text):
        kinds.append("redacted")
    return kinds


def redact(text: str) -> str:
    """`text` with every PII match replaced by [redacted:<kind>]. Matched in Simplified
    characters (memray/hanzi.py: one for one, so a match's place is its place in `text`),
    replaced in what the user wrote."""
    for kind, pattern in _PII:
        kept, last = [], 0
        for m in pattern.finditer(simplified(text)):
            if kind == "bank_card" and not _card(m):
                continue
            kept += [text[last:m.start()], f"[redacted:{kind}]"]
            last = m.end()
        text = "".join(kept) + text[last:]
    return text


def weighted_length(text: str) -> int:
    """CJK characters count 4, others 1, so 50 CJK ~ 200 Latin characters."""
    return sum(4 if "\u3000" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" else 1
               for ch in text)


MAX_FACT_WEIGHT = 200
CANDIDATE_CONFIDENCE = 0.6
CANDIDATE_TTL = timedelta(days=30)
TASK_TTL = timedelta(days=7)


_BREAKS = re.compile(r"(?<=[，,；;、。.!！?？])\s*")


def fit(fact: Fact) -> Fact:
    """The fact cut to its core when it is over the length cap: the leading clauses that
    fit (the first states the fact; later ones add detail), else the words that fit."""
    if weighted_length(fact.content) <= MAX_FACT_WEIGHT:
        return fact
    kept = ""
    for part in _BREAKS.split(fact.content):
        if weighted_length(kept + part) > MAX_FACT_WEIGHT:
            break
        kept += part
    if not kept:
        for word in re.findall(r"\S+\s*", fact.content):
            if weighted_length(kept + word) > MAX_FACT_WEIGHT:
                break
            kept += word
    if not kept:  # one overlong run of CJK: cut by characters
        for ch in fact.content:
            if weighted_length(kept + ch) > MAX_FACT_WEIGHT:
                break
            kept += ch
    content = kept.strip(" ，,；;、")
    return replace(fact, content=content, excerpt=fact.excerpt or fact.content[:200])


def admit(fact: Fact) -> str | None:
    """None when the fact may be kept, else the reason it is dropped (no content in it)."""
    kinds = pii_kinds(fact.content)
    if kinds:
        return f"pii:{','.join(kinds)}"
    if weighted_length(fact.content) > MAX_FACT_WEIGHT:
        return "too_long"
    if not fact.content.strip():
        return "empty"
    return None


def initial_status(fact: Fact) -> MemoryStatus:
    """Probation for inferred or low-confidence facts."""
    if fact.source == MemorySource.INFERRED or fact.confidence < CANDIDATE_CONFIDENCE:
        return MemoryStatus.CANDIDATE
    return MemoryStatus.ACTIVE


def expires_at(mtype: MemoryType, status: MemoryStatus, now: datetime) -> datetime | None:
    if status == MemoryStatus.CANDIDATE:
        return now + CANDIDATE_TTL
    if mtype == MemoryType.TASK_STATE:
        return now + TASK_TTL
    return None


def log_drop(reason: str) -> None:
    """One log line per dropped fact: the reason only, never the content or the user."""
    log.info("dropped a candidate fact (%s)", reason)
