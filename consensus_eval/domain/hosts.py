"""Addresses to listen on: whether one is this machine only. Standard library only, so the CLI can warn
about an address before it imports the review app (which needs the ``review`` extra)."""

from __future__ import annotations

import ipaddress

#: the Host headers the review app accepts when it listens on this machine only
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name to bind; an IPv6 address may be bracketed) is this machine only.

    ``localhost`` and every loopback address (127.0.0.0/8, ::1) are; any other name is not (it is not
    resolved), nor is ``0.0.0.0`` (every interface)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
