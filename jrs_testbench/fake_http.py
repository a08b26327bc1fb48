"""What the fake cluster managers (:mod:`.fake_standalone`, :mod:`.fake_yarn`) share: a JSON
HTTP server on a port of 127.0.0.1, run in a thread while used as a context manager, and the
executable scripts (a fake ``spark-submit``, ``yarn``) they write for the real product to run.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self


class JsonHandler(BaseHTTPRequestHandler):
    """Quiet, and answers JSON; ``json_style`` is what the real server's writer looks like."""

    json_style: dict[str, Any] = {}

    def log_message(self, *args: Any) -> None:  # quiet test output
        pass

    def _reply(self, code: int, doc: Any) -> None:
        body = json.dumps(doc, **self.json_style).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class FakeHttpServer:
    """Binds a free port at construction (so ``url`` is known before start), serves in ``with``."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def write_script(bin_dir: str | Path, name: str, template: str, **values: str) -> Path:
    """Write the executable ``<bin_dir>/<name>`` from ``template``, run by this interpreter."""
    path = Path(bin_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(template.format(python=sys.executable, **values))
    path.chmod(0o755)
    return path
