"""Free loopback ports."""

from __future__ import annotations

import socket

from kubesched.cluster._ports import free_port, free_ports, is_listening


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(5)

    assert len(set(ports)) == 5
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_picked_and_is_seen_listening() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        taken = server.getsockname()[1]

        assert is_listening(taken)
        assert taken not in free_ports(20)


def test_a_free_port_is_not_listening() -> None:
    assert not is_listening(free_port())
