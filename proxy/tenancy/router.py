"""The HTTP face of virtual keys, behind the admin key: ``/v1/toolgraph/keys``.

``POST`` creates a key and answers its secret, once (``key``); ``GET`` lists the keys
or shows one, never with a secret or its digest; ``DELETE`` revokes one, at once for
every worker and replica that shares the store. The admin key manages keys but
cannot act as one: the routes of ``/v1`` take client keys only.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from proxy.errors import NotFound
from proxy.http_responses import JSONResponse
from proxy.protocol.body import read_model
from proxy.registry.router import require_admin
from proxy.services import services_of
from proxy.tenancy.keys import KEYS_PATH, KeySpec, KeyStore, issue

PREFIX = KEYS_PATH

router = APIRouter(prefix=PREFIX, dependencies=[Depends(require_admin)])


def _keys(request: Request) -> KeyStore:
    return services_of(request).authenticator.keys


@router.post("")
async def create_key(request: Request) -> JSONResponse:
    limits = services_of(request).settings.limits
    spec = await read_model(request, limits, KeySpec, "invalid_key")
    key, secret = issue(spec)
    await _keys(request).add(key)
    return JSONResponse({**key.public(), "key": secret}, status_code=201)


@router.get("")
async def list_keys(request: Request) -> JSONResponse:
    keys = await _keys(request).all()
    return JSONResponse({"object": "list", "data": [key.public() for key in keys]})


@router.get("/{key_id}")
async def get_key(key_id: str, request: Request) -> JSONResponse:
    for key in await _keys(request).all():
        if key.id == key_id:
            return JSONResponse(key.public())
    raise _unknown(key_id)


@router.delete("/{key_id}")
async def revoke_key(key_id: str, request: Request) -> JSONResponse:
    gone = await _keys(request).remove(key_id)
    if gone is None:
        raise _unknown(key_id)
    return JSONResponse({"id": gone.id, "object": "virtual_key.deleted", "deleted": True})


def _unknown(key_id: str) -> NotFound:
    return NotFound(f"no virtual key {key_id!r}", param="key_id", code="key_not_found")
