"""How the store contract suites build and inspect each backend's store, and what they write.

A backend joins :mod:`test_store_contract` by a harness class that has :class:`Backend`'s
methods, listed in ``BACKENDS`` (``conftest.py``). The harness gives the few raw views the
contract needs: bytes written where an entry lives, a quarantined entry, the entry's expiry,
an unreachable store, the event feed, a lease.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

import pytest
import redis

from airflow_jrs.settings import JrsSettings, settings_for
from airflow_jrs.store import (
    SCHEMA_VERSION,
    JobNamespace,
    JobResult,
    JobResultStore,
    JobStatus,
    RedisJobNamespace,
    RedisJobResultStore,
)
from airflow_jrs.store.leases.lease import JobLease
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.results.documents import FolderDocuments
from jrs_testbench.helpers import free_port


class Backend(Protocol):
    """What the contract suite asks of a backend; built with the test's ``request`` (for fixtures)."""

    name: str

    def __init__(self, request: pytest.FixtureRequest) -> None: ...
    def make_store(self, namespace: str, **options: Any) -> JobResultStore: ...
    def unreachable_store(self, namespace: str) -> JobResultStore: ...
    def child_store_expr(self, namespace: str) -> str: ...
    def result_location(self, store: JobResultStore, job_id: str) -> str: ...
    def quarantine_location(self, store: JobResultStore, job_id: str) -> str: ...
    def write_raw_entry(self, store: JobResultStore, job_id: str, raw: bytes) -> None: ...
    def raw_entry(self, store: JobResultStore, job_id: str) -> bytes | None: ...
    def raw_quarantined(self, store: JobResultStore, job_id: str) -> bytes | None: ...
    def entry_ttl_ms(self, store: JobResultStore, job_id: str) -> int: ...
    def new_lease(self, store: JobResultStore, job_id: str, ttl: float = 10.0) -> JobLease: ...
    def put_intent(self, store: JobResultStore, job_id: str, value: bytes) -> None: ...
    def has_intent(self, store: JobResultStore, job_id: str) -> bool: ...
    def events(self, store: JobResultStore) -> AbstractContextManager[Callable[[float], list[dict[str, Any]]]]: ...
    def make_namespace(self, namespace: str, root: Path) -> JobNamespace: ...


class RedisHarness:
    """How the contract suite builds and inspects :class:`RedisJobResultStore`."""

    name = "redis"

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.url: str = request.getfixturevalue("redis_url")
        self.client: redis.Redis = request.getfixturevalue("redis_client")

    def make_store(self, namespace: str, **options: Any) -> JobResultStore:
        return RedisJobResultStore(self.client, namespace, **options)

    def make_namespace(self, namespace: str, root: Path) -> JobNamespace:
        """Every noun of ``namespace``, with specs (and any documents) under ``root``."""
        return RedisJobNamespace(self.client, self._settings(namespace, root))

    def _settings(self, namespace: str, root: Path) -> JrsSettings:
        return settings_for(namespace, output_root=str(root / "out"), spec_root=str(root / "specs"))

    def unreachable_store(self, namespace: str) -> JobResultStore:
        return RedisJobResultStore(f"redis://127.0.0.1:{free_port()}/0", namespace)

    def child_store_expr(self, namespace: str) -> str:
        """Python source that builds an equivalent store in another process."""
        return f"__import__('airflow_jrs.store').store.RedisJobResultStore({self.url!r}, {namespace!r})"

    def result_location(self, store: JobResultStore, job_id: str) -> str:
        return KeySpace(store.namespace).result(job_id)

    def quarantine_location(self, store: JobResultStore, job_id: str) -> str:
        return KeySpace(store.namespace).quarantine(job_id)

    def write_raw_entry(self, store: JobResultStore, job_id: str, raw: bytes) -> None:
        self.client.set(self.result_location(store, job_id), raw)

    def raw_entry(self, store: JobResultStore, job_id: str) -> bytes | None:
        """The job's key, else its field in its reference bucket (a clean reference that does
        not expire: docs/architecture.md, "Redis key layout")."""
        raw = self.client.get(self.result_location(store, job_id))
        return raw if raw is not None else self.client.hget(KeySpace(store.namespace).reference_bucket(job_id), job_id)

    def raw_quarantined(self, store: JobResultStore, job_id: str) -> bytes | None:
        return self.client.get(self.quarantine_location(store, job_id))

    def entry_ttl_ms(self, store: JobResultStore, job_id: str) -> int:
        """Remaining life of the entry: ``-1`` kept forever, ``-2`` no entry. A bucket's field
        never expires."""
        ttl = int(self.client.pttl(self.result_location(store, job_id)))
        if ttl == -2 and self.client.hexists(KeySpace(store.namespace).reference_bucket(job_id), job_id):
            return -1
        return ttl

    def new_lease(self, store: JobResultStore, job_id: str, ttl: float = 10.0) -> JobLease:
        return RedisJobLease(self.client, store.namespace, job_id, ttl=ttl)

    def put_intent(self, store: JobResultStore, job_id: str, value: bytes) -> None:
        self.client.set(KeySpace(store.namespace).intent(job_id), value)

    def has_intent(self, store: JobResultStore, job_id: str) -> bool:
        return bool(self.client.exists(KeySpace(store.namespace).intent(job_id)))

    @contextmanager
    def events(self, store: JobResultStore) -> Iterator[Callable[[float], list[dict[str, Any]]]]:
        """Subscribe before the caller acts; yields ``drain(expected)`` -> the decoded messages.

        Reads until ``expected`` messages came (at most 10 s: delivery is asynchronous, and a
        loaded machine may take a while), then 0.2 s more to catch any message too many."""
        pubsub = self.client.pubsub()
        pubsub.subscribe(KeySpace(store.namespace).events)
        deadline = time.monotonic() + 5
        while pubsub.get_message(timeout=0.1) is None:  # the subscribe confirmation
            assert time.monotonic() < deadline, "no subscribe confirmation"

        def drain(expected: int) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            end = time.monotonic() + 10.0
            while len(out) < expected and time.monotonic() < end:
                msg = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.05)
                if msg is not None and msg["type"] == "message":
                    out.append(json.loads(msg["data"]))
            end = time.monotonic() + 0.2
            while time.monotonic() < end:
                msg = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.05)
                if msg is not None and msg["type"] == "message":
                    out.append(json.loads(msg["data"]))
            return out

        try:
            yield drain
        finally:
            pubsub.close()


class RedisClusterHarness(RedisHarness):
    """The same store on a real Redis Cluster (3 primaries, 3 replicas), through a cluster client."""

    name = "redis-cluster"

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.cluster = request.getfixturevalue("redis_cluster")
        self.url = self.cluster.url
        self.client = self.cluster.client()
        self._tmp = request.getfixturevalue("tmp_path")
        request.addfinalizer(self.client.close)

    def make_store(self, namespace: str, **options: Any) -> JobResultStore:
        return RedisJobResultStore(self.client, namespace, **options)

    def unreachable_store(self, namespace: str) -> JobResultStore:
        """A store whose one-node cluster died after the client learned its topology."""
        from jrs_testbench.redis_cluster import one_node_cluster

        node = one_node_cluster(self._tmp / "gone")
        client = redis.RedisCluster(host="127.0.0.1", port=node.port, socket_timeout=1, socket_connect_timeout=1)
        node.crash()
        return RedisJobResultStore(client, namespace)

    def child_store_expr(self, namespace: str) -> str:
        port = self.cluster.nodes[0].port
        return (
            "__import__('airflow_jrs.store').store.RedisJobResultStore("
            f"__import__('redis').RedisCluster(host='127.0.0.1', port={port}), {namespace!r})"
        )


class RedisDocumentsHarness(RedisHarness):
    """The same store with ``[jrs] result_documents`` on (a folder of the test's own): a committed
    entry becomes a reference (format version 3) and its full result a document. The contract is
    the same; what a reader needs the full result for goes through ``store.full_entry``."""

    name = "redis-documents"

    def __init__(self, request: pytest.FixtureRequest) -> None:
        super().__init__(request)
        root = request.getfixturevalue("tmp_path") / "documents"
        root.mkdir(exist_ok=True)  # a mount point: the store never creates it
        self.documents = FolderDocuments(root)

    def make_store(self, namespace: str, **options: Any) -> JobResultStore:
        if not options.get("delete_on_commit"):  # deleted on commit: no reference to keep
            options.setdefault("result_documents", self.documents)
        return RedisJobResultStore(self.client, namespace, **options)

    def _settings(self, namespace: str, root: Path) -> JrsSettings:
        return settings_for(
            namespace, output_root=str(root / "out"), spec_root=str(root / "specs"),
            result_documents=str(self.documents.root),
        )  # fmt: skip

    def child_store_expr(self, namespace: str) -> str:
        return (
            f"__import__('airflow_jrs.store.redis.results').store.redis.results.RedisJobResultStore("
            f"{self.url!r}, {namespace!r}, result_documents=__import__('airflow_jrs.store.results.documents')"
            f".store.results.documents.FolderDocuments({str(self.documents.root)!r}))"
        )


# -- what the suites write --------------------------------------------------------------------

GARBAGE = b"\x80\x81\xfe not json {\x00"


def ok(job_id: str, **fields: Any) -> JobResult:
    return JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, **fields)


def entry_doc(job_id: str, *, v: object = SCHEMA_VERSION, status: str = "SUCCEEDED", state: str = "dirty") -> dict:
    """An entry as a person or another version may write it (``json.dumps`` of this is valid but not
    byte-canonical); ``job_id`` is not in it: an entry's key names its job."""
    doc: dict[str, object] = {"s": state[0], "v": v, "c": 1357095600000000}  # 2013-01-02T03:00Z
    if status != "SUCCEEDED":
        doc["st"] = status
    return doc
