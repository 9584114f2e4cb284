"""Masking of secrets in text the proxy keeps beyond one request.

:func:`proxy.errors.redact` masks the secrets the proxy knows (upstream keys, tool
credentials), as traces are masked. Text a client typed can hold secrets nobody
configured (its own API keys, tokens, passwords in a sentence): what is kept for
later requests also masks every word shaped like a credential.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from proxy.errors import redact

MASK = "***"

_CREDENTIAL = re.compile(
    r"""
    \b(?:
        (?:sk|pk|rk)[-_][A-Za-z0-9_-]{8,}        # OpenAI, Anthropic, Stripe keys
      | gh[pousr]_[A-Za-z0-9]{20,}               # GitHub tokens
      | github_pat_[A-Za-z0-9_]{20,}
      | xox[abprs]-[A-Za-z0-9-]{10,}             # Slack tokens
      | (?:AKIA|ASIA)[A-Z0-9]{16}                # AWS access key ids
      | AIza[A-Za-z0-9_-]{30,}                   # Google API keys
      | eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]+)?  # JWTs
    )
    """,
    re.VERBOSE,
)
# A long run of letters mixed with digits reads as a random token (a key, a
# password, a session id) rather than a word of a request.
_TOKEN = re.compile(r"(?<![\w/+=-])[A-Za-z0-9_+/=-]{20,}(?![\w/+=-])")
# "password: hunter2", "my API key is 1234", "Bearer abc": the value after the name.
_NAMED = re.compile(
    r"(?i)\b(passwords?|passwd|pwd|secret|token|api[ _-]?key)\b(\s*[:=]\s*|\s+is\s+)(\S+)"
    r"|\b(bearer)(\s+)(\S+)"
)


def mask_secrets(text: str, known: Iterable[str]) -> str:
    """``text`` with ``known`` secrets and credential-shaped words replaced by ``***``."""
    text = redact(text, known)
    text = _CREDENTIAL.sub(MASK, text)
    text = _TOKEN.sub(_mask_token, text)
    return _NAMED.sub(_mask_named, text)


def _mask_token(match: re.Match[str]) -> str:
    word = match.group(0)
    mixed = any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    return MASK if mixed else word


def _mask_named(match: re.Match[str]) -> str:
    name, separator = match.group(1, 2) if match.group(1) else match.group(4, 5)
    return f"{name}{separator}{MASK}"
