"""Which URLs a webhook may call: http(s) only, no credentials in them, and (unless
``CTX_WEBHOOK_ALLOW_PRIVATE``) no host that resolves to a private, loopback, link-local, multicast or
reserved address — a project admin must not reach ctxweb's internal network through it. An IPv6
address that carries an IPv4 one (IPv4-mapped or -compatible, NAT64, 6to4, Teredo) is judged by that
one too. Checked when a webhook is saved and again before every attempt, on every address the name
resolves to then (DNS may have changed in between)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings


class UrlRefused(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def url_check(url: str, *, sending: bool = False) -> str | None:
    """Raises ``UrlRefused`` with the reason. The host is looked up and every address it has must be
    public; a name that doesn't resolve is accepted on save (it may exist tomorrow), not when ``sending``.
    Answers the address checked, which the sender connects to (a second lookup could answer otherwise:
    DNS rebinding); None when any address may be called (``CTX_WEBHOOK_ALLOW_PRIVATE``)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UrlRefused(f"Not a URL: {exc}.") from None
    if parts.scheme not in ("http", "https"):
        raise UrlRefused("A webhook URL starts with http:// or https://.")
    if not parts.hostname:
        raise UrlRefused("A webhook URL names a host.")
    if parts.username or parts.password:
        raise UrlRefused("Put credentials in the secret, not in the URL.")
    if settings.CTX_WEBHOOK_ALLOW_PRIVATE:
        return None
    host = parts.hostname.rstrip(".")  # "localhost." is localhost: a trailing dot only roots the name
    literal = _ip(host)
    if literal is not None:
        _refuse_private(literal, host)
        return str(literal)
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        raise UrlRefused(f"{host} is a local name; webhooks call public addresses.")
    try:
        infos = socket.getaddrinfo(host, port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM)
    except UnicodeError:  # an empty label ("a..b") or one over 63 characters: no name at all
        raise UrlRefused(f"{host} is not a host name.") from None
    except OSError as exc:
        if not sending:
            return None
        raise UrlRefused(f"{host} does not resolve: {exc}.") from None
    checked = [address for address in (_ip(str(info[4][0])) for info in infos) if address is not None]
    for address in checked:
        _refuse_private(address, host)
    if not checked:
        raise UrlRefused(f"{host} has no address.")
    return str(checked[0])


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # SIIT (RFC 6145): ::ffff:0:a.b.c.d
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _judged(address: _Address) -> list[_Address]:
    """The addresses that decide whether ``address`` may be called: an IPv4-mapped address is its IPv4
    address; an IPv6 address that carries one (IPv4-compatible, IPv4-translated, NAT64's 64:ff9b::/96,
    6to4, Teredo)
    is judged by itself and by each IPv4 address it carries, since the packets end up there."""
    if isinstance(address, ipaddress.IPv4Address):
        return [address]
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    out: list[_Address] = [address]
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _IPV4_COMPATIBLE or address in _NAT64 or address in _IPV4_TRANSLATED:
        out.append(low32)
    if address.sixtofour is not None:
        out.append(address.sixtofour)
    if address.teredo is not None:
        out.extend(address.teredo)  # the Teredo server and the client's public address
    return out


def _refuse_private(address: _Address, host: str) -> None:
    if isinstance(address, ipaddress.IPv6Address) and address in _NAT64_LOCAL:
        # Local-use NAT64 (RFC 8215): a translator of this network, whatever IPv4 address it carries
        # (in any of RFC 6052's layouts).
        raise UrlRefused(f"{host} is a local-use NAT64 address ({address}); webhooks call public addresses.")
    for each in _judged(address):
        if not each.is_global or each.is_multicast:
            where = str(each) if each == address else f"{each}, inside {address}"
            raise UrlRefused(f"{host} is a private or reserved address ({where}); webhooks call public addresses.")
