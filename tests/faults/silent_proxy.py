"""A TCP forwarder whose link can go silent: packets dropped, not refused.

`silence()` stops forwarding and stops reading in both directions while every socket
stays open, so a peer sees neither data nor a reset: the failure keepalives, socket
timeouts and client deadlines exist for. New connections are still accepted and parked.
`resume()` forwards again (what was held is delivered late, as after a partition heals).
Unlike `TcpProxy.stop()`, nothing is ever closed by the proxy until `close()`.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from embedq.testing.processes import free_port


class SilentProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def silent(self) -> bool:
        return not self._flowing.is_set()

    def start(self) -> SilentProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def silence(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()  # release parked pumps so they see the close
        with self._lock:
            socks = list(self._sockets)
            self._sockets.clear()
            if self._listener is not None:
                socks.append(self._listener)
                self._listener = None
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _gate(self) -> bool:
        """Block while silent; False once the proxy is closed."""
        while not self._flowing.wait(0.1):
            if self._closed.is_set():
                return False
        return not self._closed.is_set()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        with self._lock:
            self._sockets.append(client)
        if not self._gate():  # a connection made during silence hears nothing yet
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._sockets.append(upstream)
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while self._gate():
                data = src.recv(65536)
                if not data or not self._gate():
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
