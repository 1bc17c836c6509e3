"""Ports for the servers the tests start: distinct within one call, and free."""

from __future__ import annotations

import socket

from embedq.testing.processes import free_ports


def test_ports_asked_together_are_distinct_and_bindable() -> None:
    ports = free_ports(64)
    assert len(ports) == 64 and len(set(ports)) == 64
    for port in ports:  # each was released: a server may bind it now
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
