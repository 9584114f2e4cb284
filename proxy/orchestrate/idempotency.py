"""``Idempotency-Key``: a repeated orchestrate request gets the first answer back.

The first request with a key claims it (an atomic add, so two racing requests
cannot both run tools) and stores its answer when done: the body, or every event
of a stream. A replay with the same body gets that answer with
``idempotent-replayed: true`` and runs nothing; the same key with another body is
a 409. While the first still runs, a repeat gets a 409 the SDK retries after a
second. A request that fails before any tool ran gives its key up, so a retry may
run. Once a tool has started the key always keeps an outcome, so a retry never
runs the tools twice: the answer, the error, or, when the client went away before
its answer (a timeout, a stream closed), a 409 ``idempotent_request_abandoned``
with ``x-should-retry: false`` naming the first request's trace, which holds what
the tools returned. Keys are per client: the hash of the client's key is part of
them.

A key that cannot be claimed fails the request before anything runs, with an error
the SDK retries: ``idempotency_store_unavailable`` (503) when Redis cannot be reached
(running the tools unprotected would break the key's promise); and
``idempotency_keys_full`` when the store (in process or Redis) is full, refusing new
keys rather than forget old ones before their TTL: a 503 when every tenant's keys
together hold ``orchestrate.max_idempotency_keys`` or ``max_idempotency_bytes``, a 429
when the client's own hold ``orchestrate.tenant_idempotency_bytes`` (one client's keys
never take another's room). An answer too large to keep leaves, instead of itself, a
409 ``idempotent_answer_not_kept`` for its retries: the tools do not run twice.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field

from proxy import json_codec
from proxy.errors import (
    Conflict,
    InvalidRequest,
    RateLimited,
    StoreFull,
    StoreUnavailable,
    TenantStoreFull,
)
from proxy.kv import KeyValue

HEADER = "idempotency-key"
REPLAYED = "idempotent-replayed"
_VALID = re.compile(r"[\x21-\x7e]{1,255}")


@dataclass(slots=True)
class Stored:
    """A finished answer: a JSON body, or the events of a stream."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    events: list[bytes] | None = None

    def encode(self, fingerprint: str) -> bytes:
        return json_codec.dumps(
            {
                "state": "done",
                "fingerprint": fingerprint,
                "status": self.status,
                "headers": self.headers,
                "body": base64.b64encode(self.body).decode(),
                "events": None
                if self.events is None
                else [base64.b64encode(e).decode() for e in self.events],
            }
        )

    @classmethod
    def decode(cls, data: dict[str, object]) -> Stored:
        events = data.get("events")
        headers = data.get("headers")
        status = data.get("status")
        return cls(
            status=status if isinstance(status, int) else 200,
            headers=dict(headers) if isinstance(headers, dict) else {},
            body=base64.b64decode(str(data.get("body") or "")),
            events=None
            if not isinstance(events, list)
            else [base64.b64decode(str(e)) for e in events],
        )


@dataclass(frozen=True, slots=True)
class Claim:
    key: str  # the store's key
    fingerprint: str
    tenant: str  # whose share of the store it takes


class IdempotencyKeys:
    def __init__(self, store: KeyValue, ttl: int) -> None:
        self._store = store
        self._ttl = ttl

    async def claim(self, key: str, client: str, body: bytes) -> Claim | Stored:
        """Claim ``key`` for this request, or return the answer stored under it."""
        if not _VALID.fullmatch(key):
            raise InvalidRequest(
                "the Idempotency-Key header must be 1-255 visible ASCII characters",
                param="Idempotency-Key",
                code="invalid_idempotency_key",
            )
        scoped = "idem:" + hashlib.sha256(f"{client}\0{key}".encode()).hexdigest()
        fingerprint = hashlib.sha256(body).hexdigest()
        running = json_codec.dumps({"state": "running", "fingerprint": fingerprint})
        try:
            if await self._store.add(scoped, running, self._ttl, tenant=client):
                return Claim(scoped, fingerprint, client)
            raw = await self._store.get(scoped)
        except StoreUnavailable:
            raise StoreUnavailable(
                "the Idempotency-Key cannot be claimed: its store (Redis) cannot be reached. "
                "Nothing ran; retry, or send the request without the key",
                param="Idempotency-Key",
                code="idempotency_store_unavailable",
                headers={"retry-after": "1"},
            ) from None
        except TenantStoreFull:
            raise RateLimited(
                "the Idempotency-Key cannot be claimed: this client's keys and their answers "
                "hold orchestrate.tenant_idempotency_bytes, every one within its TTL; a new key "
                "is refused rather than an old one forgotten. Nothing ran; retry later, or send "
                "the request without the key",
                param="Idempotency-Key",
                code="idempotency_keys_full",
                retry_after=60,
            ) from None
        except StoreFull:
            raise StoreFull(
                "the Idempotency-Key cannot be claimed: toolgraph keeps "
                "orchestrate.max_idempotency_keys keys and every one is within its TTL; it "
                "refuses a new key rather than forget an old one. Nothing ran; retry later, "
                "send the request without the key, or raise the bound",
                param="Idempotency-Key",
                code="idempotency_keys_full",
                headers={"retry-after": "60"},
            ) from None
        if raw is None:  # expired between the two calls: claim it again
            return await self.claim(key, client, body)
        found = json_codec.loads(raw)
        if found.get("fingerprint") != fingerprint:
            raise Conflict(
                "this Idempotency-Key was already used with a different request body",
                param="Idempotency-Key",
                code="idempotency_key_reused",
                headers={"x-should-retry": "false"},
            )
        if found.get("state") != "done":
            raise Conflict(
                "a request with this Idempotency-Key is still running; retry shortly",
                param="Idempotency-Key",
                code="idempotency_key_in_use",
                headers={"retry-after": "1"},
            )
        return Stored.decode(found)

    async def finish(self, claim: Claim, answer: Stored) -> None:
        """Keep ``answer`` for the key's retries; one too large to keep (over its bound,
        or its tenant's share) leaves an error in its place."""
        try:
            await self._keep(claim, answer)
        except StoreFull as exc:
            error = Conflict(
                "the first request with this Idempotency-Key was answered, but its answer "
                f"could not be kept for replays ({exc.message}); its tools do not run twice. "
                "Its trace (the x-toolgraph-trace-id header) holds what the tools returned; "
                "send a new Idempotency-Key to run the request again",
                param="Idempotency-Key",
                code="idempotent_answer_not_kept",
                headers={**answer.headers, "x-should-retry": "false"},
            )
            await self._keep(claim, Stored(error.status, error.headers, error.to_json()))
            raise

    async def _keep(self, claim: Claim, answer: Stored) -> None:
        value = answer.encode(claim.fingerprint)
        await self._store.put(claim.key, value, self._ttl, tenant=claim.tenant)

    async def abandon(self, claim: Claim, headers: dict[str, str]) -> None:
        """Keep, as the outcome of a request whose client left after tools ran, the
        error every retry gets instead of a second run."""
        error = Conflict(
            "the first request with this Idempotency-Key ran tools, then its client went "
            "away before the answer; its tools do not run twice, so there is no answer to "
            "replay. Its trace (the x-toolgraph-trace-id header) holds what the tools "
            "returned; send a new Idempotency-Key to run the request again",
            param="Idempotency-Key",
            code="idempotent_request_abandoned",
            headers={**headers, "x-should-retry": "false"},
        )
        await self._keep(claim, Stored(error.status, error.headers, error.to_json()))

    async def release(self, claim: Claim) -> None:
        await self._store.delete(claim.key)
