"""A tool's document expanded with the questions it answers, written without a model.

Users ask for what a tool does in their own words ("what will the weather be in Lisbon
tomorrow") where its document says how it is called ("get_forecast: returns the
forecast for a location"). :func:`questions` writes a few short requests from the
tool's name, description and parameters by template: the name's words as a request, the
description's first sentence as a need, and the name with its parameters. The index
embeds each as an extra row of the tool (:class:`retriever.index.ExtraRows`): a tool's
cosine is its best row's. The questions are a pure function of the tool's fields, kept
by their digest, so a re-import writes none again (and their vectors come from the
embedding cache).
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Sequence

from retriever.documents import ToolFields, name_words

#: Questions written per tool, at most.
MAX_QUESTIONS = 4

#: Words of a description sentence kept in a question.
_SENTENCE_WORDS = 20

#: Leading words of a description that say nothing of what a user wants.
_OPENERS = re.compile(
    r"^(?:this|the|an?)\s+(?:api|tool|function|endpoint|method|service|operation)\s+"
    r"(?:is used to|is used for|allows (?:you|users) to|lets (?:you|users)|can be used to|will|"
    r"helps (?:you )?to|helps)?\s*|^(?:use this to|used to|allows (?:you|users) to|"
    r"this will|you can)\s+",
    re.IGNORECASE,
)
_VERB_S = re.compile(
    r"^(gets|returns|retrieves|fetches|finds|creates|lists|searches|sends|"
    r"provides|checks|calculates|converts|updates|deletes|books|adds)\b",
    re.I,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")
#: Imperative openings of a description ("Retrieve a random image", "Verify the code").
_VERBS = frozenset(
    [
        "get",
        "retrieve",
        "fetch",
        "find",
        "create",
        "list",
        "search",
        "send",
        "provide",
        "check",
        "calculate",
        "convert",
        "update",
        "delete",
        "book",
        "add",
        "verify",
        "generate",
        "translate",
        "set",
        "remove",
        "cancel",
        "compute",
        "look",
        "lookup",
        "show",
        "query",
        "return",
        "obtain",
        "make",
        "schedule",
        "track",
        "upload",
        "download",
        "read",
        "write",
        "post",
        "edit",
        "modify",
        "validate",
        "analyze",
        "analyse",
        "detect",
        "extract",
        "summarize",
        "recommend",
        "predict",
        "reserve",
        "buy",
        "order",
        "play",
        "start",
        "stop",
        "open",
        "close",
        "register",
        "login",
        "log",
        "count",
        "estimate",
        "measure",
        "block",
        "send",
        "share",
        "enable",
        "disable",
        "assign",
        "approve",
        "submit",
        "transfer",
        "pay",
        "apply",
        "manage",
        "monitor",
    ]
)
#: Raised when the templates change, so that stored questions are written again.
_TEMPLATES = "templates-1"

_KEPT: OrderedDict[str, tuple[str, ...]] = OrderedDict()
_KEPT_MAX = 200_000


def questions(fields: ToolFields) -> tuple[str, ...]:
    """The tool's questions (deterministic; kept by the fields' digest)."""
    key = questions_digest(fields)
    found = _KEPT.get(key)
    if found is None:
        found = _write(fields)
        _KEPT[key] = found
        if len(_KEPT) > _KEPT_MAX:
            _KEPT.popitem(last=False)
    return found


def _write(fields: ToolFields) -> tuple[str, ...]:
    action = name_words(fields.name).lower()
    need, is_verb = _need(fields.description)
    params = [name_words(p.name).lower() for p in fields.params[:3] if p.name]
    written = [f"Can you {action} for me?"]
    if need and is_verb:
        written.append(f"I want to {need}")
        written.append(f"How can I {need}?")
    elif need:
        written.append(f"I need {need}")
    if params:
        written.append(f"{action} by {' and '.join(params)}")
    elif fields.group:
        written.append(f"{action} with {name_words(fields.group).lower()}")
    unique = list(dict.fromkeys(q.strip() for q in written if q.strip()))
    return tuple(unique[:MAX_QUESTIONS])


def _need(description: str) -> tuple[str, bool]:
    """The description's first sentence as what a user wants, and whether it starts with a
    verb: ``Returns the forecast for a city.`` → ``get the forecast for a city``."""
    text = description.strip()
    if not text:
        return "", False
    sentence = " ".join(_SENTENCE_END.split(text, maxsplit=1)[0].split()).rstrip(".!? :")
    sentence = _OPENERS.sub("", sentence)
    verb = _VERB_S.match(sentence)
    third = sentence.split(" ", 1)[0].lower()
    if verb is None and third.endswith("s") and third[:-1] in _VERBS:
        sentence = third[:-1] + sentence[len(third) :]
    elif verb:
        word = verb.group(1).lower()
        base = {"returns": "get", "retrieves": "get", "provides": "get", "gets": "get"}.get(
            word, word[:-2] if word.endswith(("ches", "shes", "sses")) else word[:-1]
        )
        sentence = base + sentence[verb.end() :]
    words = sentence.split()[:_SENTENCE_WORDS]
    if not words:
        return "", False
    first = words[0].lower()
    return " ".join([first, *words[1:]]), verb is not None or first in _VERBS


def questions_digest(fields: ToolFields) -> str:
    """What the questions are written from (and the templates' version): a tool whose
    digest is unchanged has the same questions, so the catalog embeds them once."""
    parts: Sequence[str] = (
        _TEMPLATES,
        fields.name,
        fields.description,
        fields.group,
        *(p.name for p in fields.params),
    )
    digest = hashlib.blake2b(digest_size=12)
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()
