"""A StatsD / DogStatsD agent for a whole deployment: a UDP socket on loopback drained by a thread.

A deployment's processes send Airflow's own metrics all the time (the scheduler's loop, every
task's); a socket nobody reads would fill its buffer and drop what a test waits for. This one
keeps only the metrics whose name starts with ``prefix`` and parses them as
``(name, value, type, tags)``.
"""

from __future__ import annotations

import socket
import threading


class StatsdListener:
    def __init__(self, prefix: str = "airflow.jrs.") -> None:
        self.prefix = prefix
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self._lock = threading.Lock()
        self._kept: list[tuple[str, float, str, dict[str, str]]] = []
        self._thread = threading.Thread(target=self._drain, name="statsd-listener", daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        """Airflow's ``[metrics]`` sending here, DogStatsD-tagged."""
        return {
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(self.port),
            "AIRFLOW__METRICS__STATSD_DATADOG_ENABLED": "True",
        }

    def _drain(self) -> None:
        while True:
            try:
                data = self.sock.recv(65535)
            except OSError:  # closed
                return
            for line in data.decode(errors="replace").splitlines():  # DogStatsD packs several a datagram
                head, _, rest = line.partition("|")
                name, _, value = head.partition(":")
                if not name.startswith(self.prefix):
                    continue
                parts = rest.split("|")
                tagged = [p[1:] for p in parts[1:] if p.startswith("#")]
                tags = dict(t.split(":", 1) for t in tagged[0].split(",") if ":" in t) if tagged else {}
                with self._lock:
                    self._kept.append((name, float(value), parts[0], tags))

    def metrics(self) -> list[tuple[str, float, str, dict[str, str]]]:
        """Every kept metric so far, oldest first."""
        with self._lock:
            return list(self._kept)

    def close(self) -> None:
        self.sock.close()
