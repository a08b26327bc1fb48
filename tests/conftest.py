"""Shared fixtures: a private redis-server per session, a fresh namespace per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis

from airflow_jrs.embedded_redis import EmbeddedRedis


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: ``JRS_TEST_REDIS_URL`` when set, else a private redis-server (append-only)."""
    url = os.environ.get("JRS_TEST_REDIS_URL")
    if url:
        yield url
        return
    with EmbeddedRedis(tmp_path_factory.mktemp("redis")) as server:
        os.environ["JRS_TEST_REDIS_SERVER_PORT"] = str(server.port)
        yield server.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def namespace() -> str:
    """Each test gets its own namespace, so tests never see each other's keys (and never flush)."""
    return f"t-{uuid.uuid4().hex[:12]}"
