"""The studio binds its own socket before it announces anything (``studio.server._listen``);
given ``::`` it must still take IPv4, as the server it hands the socket to did."""

from __future__ import annotations

import socket

import pytest

from studio.server import _listen


def test_the_ipv6_any_address_takes_ipv4_connections_too() -> None:
    if not socket.has_dualstack_ipv6():
        pytest.skip("this machine has no dual-stack IPv6 sockets")
    with _listen("::", 0) as listening:
        port = listening.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_an_ipv4_address_is_bound_as_given() -> None:
    with _listen("127.0.0.1", 0) as listening:
        assert listening.family is socket.AF_INET
        assert listening.getsockname()[0] == "127.0.0.1"
