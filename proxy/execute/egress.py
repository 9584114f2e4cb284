"""Where tools may connect: the executor must not be a way into the cluster's network.

Two checks, both on every hop of every request (redirects included):

* the host name must match the catalog's allow-list (``api.example.com`` or
  ``*.example.com``; an empty list allows any host), checked when the request is
  sent;
* every address the name resolves to must be public unless private networks are
  allowed: loopback, private, link-local (cloud metadata at 169.254.169.254),
  shared, reserved and multicast ranges are refused. An IPv6 address that carries
  an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``,
  IPv4-translated ``::ffff:0:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``,
  Teredo ``2001::/32``, an ISATAP interface identifier ``…:5efe:a.b.c.d``) is judged
  by the IPv4 it carries too, since a translator or tunnel on the way delivers it
  there; the local-use NAT64 prefix ``64:ff9b:1::/48`` is not public at all (its
  operator picks where the IPv4 sits). The check runs inside the connection
  itself (:class:`GuardedBackend`), which then connects to the address it
  checked, so a name that resolves to something else a moment later (DNS
  rebinding) cannot slip through.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import httpcore

from proxy.config import ExecutorSettings
from proxy.errors import EgressDenied

Resolver = Callable[[str, int], Awaitable[list[str]]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, through the system resolver."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise EgressDenied(f"cannot resolve {host}: {exc.strerror}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class EgressPolicy:
    """One catalog's rules for outgoing tool calls."""

    def __init__(
        self,
        allowed_hosts: Sequence[str] = (),
        *,
        allow_private: bool = False,
        resolver: Resolver = resolve_host,
    ) -> None:
        self.allowed_hosts = tuple(host.lower().rstrip(".") for host in allowed_hosts)
        self.allow_private = allow_private
        self._resolve = resolver

    @classmethod
    def from_settings(cls, executor: ExecutorSettings) -> EgressPolicy:
        return cls(executor.allowed_hosts, allow_private=executor.allow_private_networks)

    def check_host(self, host: str) -> None:
        """Refuse a host name outside the allow-list, or a literal address it forbids."""
        name = host.lower().rstrip(".").strip("[]")
        if self.allowed_hosts and not any(_matches(name, rule) for rule in self.allowed_hosts):
            raise EgressDenied(f"host {name} is not in the tool catalog's allow-list")
        literal = _literal_address(name)
        if literal is not None:
            self.check_address(literal, name)

    def check_address(self, address: IPAddress, host: str) -> None:
        if not self.allow_private and not is_public(address):
            raise EgressDenied(f"host {host} resolves to a non-public address ({address})")

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses to connect to, every one of them checked."""
        self.check_host(host)
        found = await self._resolve(host, port)
        if not found:
            raise EgressDenied(f"host {host} has no address")
        for address in found:
            self.check_address(ipaddress.ip_address(address.split("%")[0]), host)
        return found


def is_public(address: IPAddress) -> bool:
    """Whether ``address``, and every IPv4 address embedded in it, is public."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # the IPv4 address itself, spelt as IPv6
            return is_public(address.ipv4_mapped)
        if address in _NAT64_LOCAL:
            return False
        if not all(is_public(inner) for inner in embedded_ipv4(address)):
            return False
    return address.is_global and not address.is_multicast


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses that traffic to ``address`` may be delivered to."""
    found = [address.ipv4_mapped] if address.ipv4_mapped is not None else []
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)  # the Teredo server and the client's NAT address
    last = ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    if any(address in network for network in _LAST_32_BITS) or _is_isatap(address):
        found.append(last)
    return found


# Address blocks whose last 32 bits are an IPv4 address a translator delivers to:
# IPv4-compatible (RFC 4291, deprecated), IPv4-translated (RFC 2765) and the
# well-known NAT64 prefix (RFC 6052).
_LAST_32_BITS = (
    ipaddress.IPv6Network("::/96"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("64:ff9b::/96"),
)
# Local-use NAT64 (RFC 8215): not globally reachable, and the IPv4 address may sit
# at any of RFC 6052's positions, as its operator chose.
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_ISATAP_MASK, _ISATAP_ID = 0xFDFF_FFFF, 0x0000_5EFE  # ignoring the u bit (RFC 5214)


def _is_isatap(address: ipaddress.IPv6Address) -> bool:
    return (int(address) >> 32) & _ISATAP_MASK == _ISATAP_ID


def _matches(name: str, rule: str) -> bool:
    if rule.startswith("*."):
        return name.endswith(rule[1:])
    return name == rule


def _literal_address(name: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses the policy has checked.

    ``inner`` and ``connect_errors`` may be another httpcore's (httpcore2, under the
    MCP SDK's httpx2): the interface is the same, only the classes differ."""

    def __init__(
        self,
        policy: EgressPolicy,
        inner: Any = None,
        connect_errors: tuple[type[Exception], ...] = (
            httpcore.ConnectError,
            httpcore.ConnectTimeout,
        ),
    ) -> None:
        self._policy = policy
        self._inner = inner or httpcore.AnyIOBackend()
        self._connect_errors = connect_errors

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._policy.addresses(host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                stream: httpcore.AsyncNetworkStream = await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
                return stream
            except self._connect_errors as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise EgressDenied("tools may not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
