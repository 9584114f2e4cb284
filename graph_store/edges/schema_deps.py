"""STRONG_DEP / WEAK_DEP edges by rule: a response field of A that can fill an input of B.

No LLM: fields and parameters are matched by normalised name (camelCase, plurals and a
few synonyms folded; ``hotel.id`` also reads as ``hotel_id``), compatible type and the
overlap of their descriptions. Guards keep homonyms out: a generic name (``id``,
``name``, ``type``…) only joins tools of the same group, and only when B's description
names the entity ("the id of the match") and A's name or field path is about it; a
name offered by many groups is common knowledge rather than a dependency. Inputs
a user types (``page``, ``limit``, ``query``…) are never filled from outputs.

Across groups only universal values (a latitude, an email, a VIN) or specifically
named ones described alike within one category match. An edge is STRONG when it fills
a required input and few tools of B's own group offer the resource; WEAK when the input
is optional, the resource is widely available, or it comes from another group.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pydantic import JsonValue

from graph_store.models import Edge, EdgeKind, Tool

ORIGIN = "schema"
THRESHOLD = 0.7
#: More other groups than this offering a resource make it common: no cross-group edges.
MAX_PROVIDER_GROUPS = 4
#: A resource this many tools offer can be had elsewhere: the edge is WEAK.
STRONG_MAX_PROVIDERS = 3
_DEPTH = 4


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


GENERIC = _words(
    "id ids name type status code message data result results value key title description "
    "url link text date time size total success error info detail details item items "
    "number num label kind content body response"
)
USER_INPUT = _words(
    "page limit offset sort order format lang language query q search keyword keywords "
    "count per_page page_size pagesize api_key apikey token callback fields start end "
    "locale country_code currency skip take max min"
)
#: Values that mean the same whichever API returns them.
UNIVERSAL = _words(
    "latitude longitude postal_code city email phone phone_number ip ip_address domain "
    "address timezone isbn vin iban symbol ticker stock_symbol hashtag username country"
)
_SYNONYMS = {
    "lat": "latitude",
    "lng": "longitude",
    "lon": "longitude",
    "long": "longitude",
    "zip": "postal_code",
    "zipcode": "postal_code",
    "zip_code": "postal_code",
    "postcode": "postal_code",
    "identifier": "id",
    "uid": "user_id",
    "userid": "user_id",
    "tz": "timezone",
}
_STOP = _words("the a an of to for and or in on by with is be this that from as at it")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORDS = re.compile(r"[a-z0-9]+")
_NUMERIC = {"string", "integer", "number"}


@dataclass(frozen=True, slots=True)
class Field:
    tool: Tool
    path: str
    key: str
    type: str
    words: frozenset[str]


def name_key(name: str) -> str:
    """``hotelIds`` → ``hotel_id``; ``zip`` → ``postal_code``."""
    words = _WORDS.findall(_CAMEL.sub("_", name).lower())
    key = "_".join(_singular(word) for word in words)
    return _SYNONYMS.get(key, key)


def _singular(word: str) -> str:
    if word == "ids":
        return "id"
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def description_words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORDS.findall(text.lower()) if w not in _STOP and len(w) > 2)


def _entity_words(text: str) -> frozenset[str]:
    words = _WORDS.findall(_CAMEL.sub("_", text).lower().replace("_", " "))
    return frozenset(_singular(w) for w in words if len(w) > 2 and w not in _STOP) - GENERIC


def response_fields(tool: Tool) -> Iterator[Field]:
    """Every named leaf of the tool's response schema, with the keys it can be read as."""
    schema = tool.response_schema
    if schema is not None:
        yield from _walk(tool, schema, (), 0)


def _walk(
    tool: Tool, schema: dict[str, JsonValue], path: tuple[str, ...], depth: int
) -> Iterator[Field]:
    if depth > _DEPTH:
        return
    items = schema.get("items")
    if isinstance(items, dict):
        yield from _walk(tool, items, path, depth + 1)
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    for name, spec in properties.items():
        if not isinstance(spec, dict):
            continue
        kind = spec.get("type")
        if kind in ("object", "array") or "properties" in spec:
            yield from _walk(tool, spec, (*path, name), depth + 1)
            continue
        words = description_words(f"{spec.get('description') or ''} {spec.get('title') or ''}")
        field_type = kind if isinstance(kind, str) else ""
        key = name_key(name)
        yield Field(tool, ".".join((*path, name)), key, field_type, words)
        if key in GENERIC and path:
            # results[].hotel.id is a hotel_id
            parent = name_key(path[-1])
            yield Field(tool, ".".join((*path, name)), f"{parent}_{key}", field_type, words)


def schema_edges(tools: Iterable[Tool]) -> list[Edge]:
    """The rule pass over a catalog: one edge per (A, B), its best match kept."""
    catalog = list(tools)
    providers: dict[str, dict[str, list[Field]]] = defaultdict(lambda: defaultdict(list))
    for tool in catalog:
        for found in response_fields(tool):
            providers[found.key][found.tool.group_id].append(found)
    best: dict[tuple[str, str], Edge] = {}
    for consumer in catalog:
        required = set(consumer.required_params())
        for param, spec in consumer.param_schemas().items():
            key = name_key(param)
            if key in USER_INPUT or key not in providers:
                continue
            for edge in _match(consumer, param, key, spec, param in required, providers[key]):
                held = best.get((edge.src, edge.dst))
                if held is None or (edge.kind.rank, -edge.weight) < (held.kind.rank, -held.weight):
                    best[(edge.src, edge.dst)] = edge
    return sorted(best.values(), key=lambda e: (e.src, e.dst))


def _match(
    consumer: Tool,
    param: str,
    key: str,
    spec: dict[str, JsonValue],
    required: bool,
    by_group: dict[str, list[Field]],
) -> Iterator[Edge]:
    wanted_type = str(spec.get("type") or "")
    wanted_words = description_words(str(spec.get("description") or ""))
    family = [o for o in by_group.get(consumer.group_id, []) if o.tool.id != consumer.id]
    strong = required and len({o.tool.id for o in family}) <= STRONG_MAX_PROVIDERS
    kind = EdgeKind.STRONG_DEP if strong else EdgeKind.WEAK_DEP
    entity = _entity_words(str(spec.get("description") or "")) if key in GENERIC else None
    for offer in family:
        # The original name: ToolBench's "<api>_for_<tool>" would lend A its group's words.
        about = _entity_words(f"{offer.tool.original_name} {offer.path}")
        if entity is not None and not entity & about:
            # A bare "id" joins only when B says whose id it wants and A is about that.
            continue
        yield from _edge(
            offer, consumer, param, key, kind, _score(wanted_type, wanted_words, offer)
        )
    # Outside its own group a value means the same only when it is universal (a
    # latitude) or named specifically and described alike in the same category; and
    # it could be had elsewhere, so the edge is weak.
    others = [group for group in by_group if group != consumer.group_id]
    if key in GENERIC or not others or len(others) > MAX_PROVIDER_GROUPS:
        return
    for group in others:
        for offer in by_group[group]:
            universal = key in UNIVERSAL
            related = offer.tool.category == consumer.category and "_" in key
            if not (universal or related):
                continue
            score = _score(wanted_type, wanted_words, offer)
            if not universal and not (wanted_words & offer.words):
                continue
            yield from _edge(offer, consumer, param, key, EdgeKind.WEAK_DEP, score)


def _edge(
    offer: Field, consumer: Tool, param: str, key: str, kind: EdgeKind, score: float
) -> Iterator[Edge]:
    if score >= THRESHOLD:
        yield Edge(
            src=offer.tool.id,
            dst=consumer.id,
            kind=kind,
            weight=round(score, 3),
            resource=key,
            origin=ORIGIN,
            reason=f"{offer.path} -> {param}",
        )


def _score(wanted_type: str, wanted_words: frozenset[str], offer: Field) -> float:
    if not _compatible(wanted_type, offer.type):
        return 0.0
    overlap = 0.0
    if wanted_words and offer.words:
        overlap = len(wanted_words & offer.words) / len(wanted_words | offer.words)
    # The name matched already (the index is by name); type and wording add confidence.
    return 0.7 + 0.1 * (wanted_type == offer.type) + 0.2 * min(1.0, 2 * overlap)


def _compatible(wanted: str, offered: str) -> bool:
    if not wanted or not offered or wanted == offered:
        return True
    return wanted in _NUMERIC and offered in _NUMERIC
