"""Where the Recompute button sends the user's token: the deployment's own API server, never the
host a request names (the real route: tests/airflow/test_ui_plugin.py).

With ``[api] base_url`` unset, the URL is the address the connection reached on this server
(the ASGI scope's ``server``, the socket's local address), which no header changes.
"""

from __future__ import annotations

import pytest
from fastapi import HTTPException
from starlette.requests import Request

from airflow_jrs.plugins.recompute import airflow_root


def request(server: tuple[str, int] | None, host: str = "evil.example:7499") -> Request:
    return Request({
        "type": "http", "method": "POST", "scheme": "http", "path": "/jrs/api/results/j/recompute",
        "root_path": "", "query_string": b"", "server": server, "client": ("10.0.0.9", 50000),
        "headers": [(b"host", host.encode()), (b"x-forwarded-host", host.encode())],
    })  # fmt: skip


@pytest.mark.parametrize(
    ("base_url", "server", "root"),
    [
        ("", ("127.0.0.1", 8080), "http://127.0.0.1:8080"),
        ("", ("::1", 8080), "http://[::1]:8080"),
        ("/airflow/", ("10.1.2.3", 8080), "http://10.1.2.3:8080/airflow"),
        ("https://airflow.example.com/base/", ("127.0.0.1", 8080), "https://airflow.example.com/base"),
    ],
)
def test_the_api_url_comes_from_configuration_or_the_servers_own_address(monkeypatch, base_url, server, root):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", base_url)
    assert airflow_root(request(server)) == root


def test_https_when_the_api_server_serves_tls(monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "")
    monkeypatch.setenv("AIRFLOW__API__SSL_CERT", "/etc/airflow/cert.pem")
    assert airflow_root(request(("127.0.0.1", 8443))) == "https://127.0.0.1:8443"


def test_a_server_without_an_address_asks_for_base_url(monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "")
    with pytest.raises(HTTPException) as info:
        airflow_root(request(None))
    assert info.value.status_code == 500 and "[api] base_url" in info.value.detail
