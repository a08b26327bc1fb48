"""A TCP proxy in front of Redis that loses, delays or holds traffic: the faults of a network.

That is what a network blip between a command and its reply looks like to redis-py: the
connection breaks after the server executed the command, the client's retry policy sends the
same command again on a new connection. Used to prove that a retried ACQUIRE or TAKE_OVER
recognises the lease it already took instead of waiting a TTL for "another attempt"::

    with LossyProxy("127.0.0.1", redis_port) as proxy:
        client = redis.Redis(port=proxy.port, retry=Retry(NoBackoff(), 3))
        client.ping()               # connection made, nothing lost
        proxy.drop_next_reply()     # the next reply is read from Redis, thrown away, and the
        client.incr("k")            # client's connection closed: redis-py retries, k == 2

The fault trials (``benchmarks/fault_trials.py``) give every "host" its own proxy, so one host can be cut off while
the others go on, and set a lasting mode with :meth:`set_mode`:

* ``drop-replies``: every command reaches Redis and runs; its reply is thrown away and the
  connection closed (a client that retries runs the command again, and never hears back);
* ``delay``: every chunk, both ways, waits ``delay_ms`` before it is forwarded;
* ``blackhole``: nothing passes either way and connections stay open: the client hangs until
  its own timeout. Bytes sent meanwhile are *held*, not lost, as TCP retransmits them: on
  :meth:`heal` a command sent during the partition still reaches Redis, even if its client gave
  up on it. New connections are accepted but reach Redis only after the heal.

:meth:`retarget` points the proxy at another server and closes every open connection (a
failover behind a virtual IP); :meth:`cut` only closes them (a reset). A reply is "the next
chunk the server sends", which holds for one small command at a time per connection.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

MODES = ("pass", "drop-replies", "delay", "blackhole")


class _Pair:
    """One client connection and the proxy's connection to the server on its behalf."""

    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.server: socket.socket | None = None
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.server):
            if sock is None:
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass


class LossyProxy:
    """Forward bytes between clients and ``(host, port)``; :meth:`drop_next_reply` arms one loss,
    :meth:`set_mode` a lasting fault, :meth:`heal` ends it."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._armed = threading.Event()
        self._closed = threading.Event()
        self._flowing = threading.Event()  # cleared while blackholed
        self._flowing.set()
        self._lock = threading.Lock()
        self._pairs: set[_Pair] = set()
        self.mode = "pass"
        self.delay_s = 0.0
        self.dropped = 0

    @property
    def target(self) -> tuple[str, int]:
        return self._target

    def drop_next_reply(self) -> None:
        """The next reply any client should get is swallowed and that client disconnected."""
        self._armed.set()

    def set_mode(self, mode: str, *, delay_ms: float = 0.0) -> None:
        """Start a lasting fault: one of :data:`MODES` (``pass`` is no fault)."""
        if mode not in MODES:
            raise ValueError(f"unknown proxy mode {mode!r}: use one of {', '.join(MODES)}")
        if mode == "delay" and delay_ms <= 0:
            raise ValueError(f"mode 'delay' needs delay_ms > 0 (got {delay_ms}): pass how long each chunk waits")
        self.delay_s = delay_ms / 1000.0 if mode == "delay" else 0.0
        self.mode = mode
        if mode == "blackhole":
            self._flowing.clear()
        else:
            self._flowing.set()  # held bytes go on, in order, as TCP would deliver them

    def heal(self) -> None:
        """End any fault: traffic passes again (held bytes first)."""
        self.set_mode("pass")

    def cut(self) -> int:
        """Close every open connection, both sides (a reset); returns how many."""
        with self._lock:
            pairs = list(self._pairs)
            self._pairs.clear()
        for pair in pairs:
            pair.close()
        return len(pairs)

    def retarget(self, host: str, port: int) -> None:
        """Send new connections to ``(host, port)`` and close the open ones (they led to the old one)."""
        self._target = (host, port)
        self.cut()

    def open_connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def __enter__(self) -> LossyProxy:
        threading.Thread(target=self._accept, name="lossy-proxy", daemon=True).start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()  # release held pumps so their threads end
        try:
            self._listener.close()
        except OSError:
            pass
        self.cut()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            pair = _Pair(client)
            with self._lock:
                self._pairs.add(pair)
            threading.Thread(target=self._connect, args=(pair,), name="lossy-proxy-conn", daemon=True).start()

    def _connect(self, pair: _Pair) -> None:
        if not self._hold(pair):  # blackholed: the connection reaches the server after the heal
            return
        try:
            pair.server = socket.create_connection(self._target, timeout=5)
            pair.server.settimeout(None)
        except OSError:
            self._drop(pair)  # the server is down: the client sees its connection closed
            return
        if pair.closed.is_set():  # cut while connecting
            self._drop(pair)
            return
        threading.Thread(target=self._pump, args=(pair, pair.client, pair.server, False), daemon=True).start()
        threading.Thread(target=self._pump, args=(pair, pair.server, pair.client, True), daemon=True).start()

    def _hold(self, pair: _Pair) -> bool:
        """Wait while blackholed; False once the connection or the proxy is closed."""
        while not self._flowing.wait(0.05):
            if pair.closed.is_set() or self._closed.is_set():
                return False
        return not (pair.closed.is_set() or self._closed.is_set())

    def _drop(self, pair: _Pair) -> None:
        with self._lock:
            self._pairs.discard(pair)
        pair.close()

    def _pump(self, pair: _Pair, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while True:
                chunk = src.recv(65536)
                if not self._hold(pair):  # what arrived during a blackhole waits for the heal
                    break
                if not chunk:
                    break
                if replies and (self._armed.is_set() or self.mode == "drop-replies"):
                    self._armed.clear()
                    self.dropped += 1
                    break  # the server executed the command; its reply is lost with the connection
                if self.delay_s:
                    time.sleep(self.delay_s)
                dst.sendall(chunk)
        except OSError:
            pass
        self._drop(pair)
