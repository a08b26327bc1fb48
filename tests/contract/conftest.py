"""Fixtures of the store contract suites: ``backend`` and ``store``, once per entry of ``BACKENDS``.

Adding a backend: a harness class with :class:`harness.Backend`'s methods, and one line here.
"""

from __future__ import annotations

import pytest
from harness import Backend, RedisClusterHarness, RedisDocumentsHarness, RedisHarness

from airflow_jrs.store import JobResultStore

BACKENDS: list[type[Backend]] = [RedisHarness, RedisDocumentsHarness, RedisClusterHarness]
#: Marks per backend: the cluster one starts six redis-servers (once per session).
MARKS = {RedisClusterHarness: [pytest.mark.cluster]}


@pytest.fixture(params=[pytest.param(harness, marks=MARKS.get(harness, []), id=harness.name) for harness in BACKENDS])
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param(request)


@pytest.fixture
def store(backend: Backend, namespace: str) -> JobResultStore:
    return backend.make_store(namespace)
