"""DNS-rebinding protection for toolproof's loopback HTTP servers (one guard for both).

A page on ``evil.example`` can make a browser send requests to ``127.0.0.1`` by
resolving its own name there (DNS rebinding); the browser then sends
``Host: evil.example:PORT`` and ``Origin: http://evil.example:PORT``. A server bound to
a loopback address (anything in ``127.0.0.0/8``, ``::1``, in any spelling:
``0:0:0:0:0:0:0:1``, ``[::1]``, ``::ffff:127.0.0.1``) or to ``localhost`` therefore
accepts only requests whose ``Host`` — and ``Origin``, when a browser sends one — name
the address it is bound to (or ``localhost`` for ``127.0.0.1``/``::1``), with the bound
port. A wrong ``Host`` is answered 421 (Misdirected Request, RFC 9110 §15.5.20), a wrong
``Origin`` 403, before anything else runs: no token check, no body read, no tool.

Used by ``toolproof serve --http`` (MCP streamable HTTP) and ``toolproof serve-api``.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HostGuard", "LoopbackNames", "loopback_address", "loopback_names"]

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_LOCALHOST_ADDRESSES = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


def loopback_address(host: str) -> _Address | None:
    """The loopback address ``host`` spells, normalised, or ``None`` when it is not one.

    ``[::1]``, ``0:0:0:0:0:0:0:1`` and ``::1`` are the same address; an IPv4-mapped
    IPv6 address (``::ffff:127.0.0.2``) is its IPv4 address. Names are never addresses.
    """
    try:
        address = ipaddress.ip_address(host.strip().removeprefix("[").removesuffix("]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address if address.is_loopback else None


@dataclass(frozen=True)
class LoopbackNames:
    """The names a loopback server answers to.

    Attributes:
        addresses: the bound address(es), normalised.
        localhost: whether the name ``localhost`` is accepted (bound to ``127.0.0.1``,
            ``::1`` or ``localhost``).
        port: the bound TCP port; ``None`` accepts any port (an app built without one).

    """

    addresses: frozenset[_Address]
    localhost: bool
    port: int | None

    def shown(self) -> str:
        """The accepted ``Host`` values, for messages (``127.0.0.2:8080``)."""
        hosts = sorted(f"[{a}]" if a.version == 6 else str(a) for a in self.addresses)
        if self.localhost:
            hosts.append("localhost")
        port = f":{self.port}" if self.port is not None else ""
        return ", ".join(f"{host}{port}" for host in hosts)

    def accepts(self, authority: str, default_port: int) -> bool:
        """Whether ``authority`` (``host[:port]``, the ``Host`` header's form) is one of ours."""
        authority = authority.strip().lower()
        if authority.startswith("["):
            host, bracket, rest = authority[1:].partition("]")
            if not bracket or (rest and not rest.startswith(":")):
                return False
            port_text = rest[1:] if rest else ""
        else:
            host, colon, port_text = authority.rpartition(":")
            if not colon:
                host, port_text = authority, ""
        if port_text:
            if not port_text.isdigit() or len(port_text) > 5:
                return False
            port = int(port_text)
        else:
            port = default_port
        if self.port is not None and port != self.port:
            return False
        if host == "localhost":
            return self.localhost
        address = loopback_address(host)
        return address is not None and address in self.addresses


def loopback_names(host: str, port: int | None) -> LoopbackNames | None:
    """The names a server bound to ``host:port`` answers to, or ``None`` off loopback.

    Args:
        host: the bound address or name (``127.0.0.2``, ``::1``, ``localhost``).
        port: the bound port (``None``: any).

    Returns:
        :class:`LoopbackNames`, or ``None`` when ``host`` is neither a loopback address
        nor ``localhost`` (such a server needs a token instead).

    """
    if host.strip().lower() == "localhost":
        return LoopbackNames(frozenset(_LOCALHOST_ADDRESSES), True, port)
    address = loopback_address(host)
    if address is None:
        return None
    return LoopbackNames(frozenset({address}), address in _LOCALHOST_ADDRESSES, port)


class HostGuard:
    """ASGI middleware: refuse a request whose ``Host`` or ``Origin`` is not a bound name.

    Args:
        app: the app to guard (every HTTP and WebSocket request).
        names: what the server answers to (:func:`loopback_names`).

    A missing or foreign ``Host`` answers 421, a foreign ``Origin`` (``null``, another
    scheme, host or port) 403; both as a JSON problem ``{"status", "error", "message",
    "fields"}`` (``error`` ``host-not-allowed`` / ``origin-not-allowed``). A request
    without ``Origin`` (any non-browser client) is judged by ``Host`` alone.
    """

    def __init__(self, app: ASGIApp, names: LoopbackNames) -> None:
        self.app = app
        self.names = names

    def _problem(self, raw_headers: list[tuple[bytes, bytes]]) -> tuple[int, str, str] | None:
        hosts = [value for name, value in raw_headers if name == b"host"]
        origins = [value for name, value in raw_headers if name == b"origin"]
        host = b", ".join(hosts).decode("latin-1")
        allowed = self.names.shown()
        if len(hosts) != 1 or not self.names.accepts(host, 80):
            return (
                421,
                "host-not-allowed",
                f"Host {host!r} is not a name this server is bound to ({allowed}): "
                "refused as a possible DNS-rebinding attack",
            )
        if not origins:
            return None
        origin = b", ".join(origins).decode("latin-1")
        parts = urlsplit(origin)
        if len(origins) > 1 or parts.scheme != "http" or parts.path or not parts.netloc:
            good = False
        else:
            good = self.names.accepts(parts.netloc, 80)
        if good:
            return None
        return (
            403,
            "origin-not-allowed",
            f"Origin {origin!r} is not this server (http://{allowed}): "
            "refused as a possible DNS-rebinding attack",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection; requests naming another host are refused."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        problem = self._problem(list(scope.get("headers", [])))
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, error, message = problem
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
            return
        body = json.dumps({"status": status, "error": error, "message": message, "fields": {}})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body.encode("utf-8")})
