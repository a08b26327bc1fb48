"""A TCP proxy in front of Redis that can lose one reply: the command ran, the client never hears.

That is what a network blip between a command and its reply looks like to redis-py: the
connection breaks after the server executed the command, the client's retry policy sends the
same command again on a new connection. Used to prove that a retried ACQUIRE or TAKE_OVER
recognises the lease it already took (issue 18, defect 9)::

    with LossyProxy("127.0.0.1", redis_port) as proxy:
        client = redis.Redis(port=proxy.port, retry=Retry(NoBackoff(), 3))
        client.ping()               # connection made, nothing lost
        proxy.drop_next_reply()     # the next reply is read from Redis, thrown away, and the
        client.incr("k")            # client's connection closed: redis-py retries, k == 2

Small on purpose: one thread per connection direction, bounded by the test's lifetime; a
reply is "the next chunk the server sends", which holds for one small command at a time.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class LossyProxy:
    """Forward bytes between clients and ``(host, port)``; :meth:`drop_next_reply` arms one loss."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._armed = threading.Event()
        self._closed = threading.Event()
        self.dropped = 0
        self._sockets: list[socket.socket] = [self._listener]

    def drop_next_reply(self) -> None:
        """The next reply any client should get is swallowed and that client disconnected."""
        self._armed.set()

    def __enter__(self) -> LossyProxy:
        threading.Thread(target=self._accept, name="lossy-proxy", daemon=True).start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._closed.set()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while chunk := src.recv(65536):
                if replies and self._armed.is_set():
                    self._armed.clear()
                    self.dropped += 1
                    break  # the server executed the command; its reply is lost with the connection
                dst.sendall(chunk)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
