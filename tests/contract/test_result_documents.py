"""The compact clean entry (opt-in ``[jrs] result_documents``): what the contract suite
cannot see from outside. A committed entry is a reference of at most 44 B, a field of its
reference bucket (or, with ``clean_ttl``, its own key, kept embedded); its document is written
before it; the skip decision reads the reference alone in one round trip; readers that need the
full result read the document, and a missing one is an error naming its path and the fix.
Without the setting, entries stay JSON (schema 4)."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
import redis
from redis.connection import AbstractConnection

from airflow_jrs.cli import main
from airflow_jrs.domain.decision import decide
from airflow_jrs.exceptions import ResultDocumentError
from airflow_jrs.settings import settings_for
from airflow_jrs.store import Attempt, EntryState, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.store.results.documents import FolderDocuments, ResultDocuments
from airflow_jrs.store.results.reference import decode_reference, document_name, encode_reference
from airflow_jrs.store.results.serde import decode_history_item
from airflow_jrs.views.job import inspect_job

JOB = "flights.daily.2013-01-01T00:00:00+00:00"
FP = hashlib.sha256(b"the application and its arguments").hexdigest()


def full(job_id: str = JOB, **fields: object) -> JobResult:
    values: dict[str, object] = {
        "application_id": "local-1795483251916",
        "outputs": {"flights": f"/out/{job_id}/fence-7"},
        "metrics": {"rows": 1234},
        "fingerprint": FP,
        "attempt": Attempt("flights", "daily", "scheduled__2013-01-01", 1),
        **fields,
    }
    return JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, **values)  # type: ignore[arg-type]


@pytest.fixture
def folder(tmp_path: Path) -> FolderDocuments:
    (tmp_path / "documents").mkdir()  # a mount point: the store never creates it
    return FolderDocuments(tmp_path / "documents")


@pytest.fixture
def store(redis_client: redis.Redis, namespace: str, folder: FolderDocuments) -> RedisJobResultStore:
    return RedisJobResultStore(redis_client, namespace, result_documents=folder)


def committed(store: RedisJobResultStore, redis_client: redis.Redis, fence: int = 7) -> bytes:
    redis_client.set(KeySpace(store.namespace).fence_counter, fence - 1)  # the next token is ``fence``
    lease = RedisJobLease(redis_client, store.namespace, JOB, ttl=30)
    token = lease.acquire()
    assert int(token) == fence
    store.create_dirty_result(full(), fence=token)
    lease.release()
    store.mark_result_as_clean(JOB, expected=store.get_entry(JOB))
    return stored(redis_client, store.namespace)


def stored(redis_client: redis.Redis, namespace: str, job_id: str = JOB) -> bytes | None:
    """The job's stored bytes wherever the store keeps them: its key, else its reference bucket
    (a clean reference that does not expire, docs/architecture.md "Redis key layout")."""
    keys = KeySpace(namespace)
    raw = redis_client.get(keys.result(job_id))
    return raw if raw is not None else redis_client.hget(keys.reference_bucket(job_id), job_id)


def document_path(store: RedisJobResultStore, folder: FolderDocuments) -> Path:
    """Where the document of the job's current entry (a reference) is."""
    entry = store.get_entry(JOB)
    assert entry is not None and entry.summary
    where = Path(folder.location(store.namespace, JOB, document_name(entry)))
    assert where.name.startswith(f"{entry.result.fence}-"), where
    return where


def test_a_committed_entry_is_a_reference_field_of_its_bucket_and_no_key_of_its_own(store, redis_client):
    """Without ``clean_ttl`` a reference is a field of its bucket's hash (about 90 B in Redis's
    compact encoding where a key of its own costs about 170 B); the dirty entry's key is gone."""
    keys = KeySpace(store.namespace)
    raw = committed(store, redis_client)
    assert raw.startswith(b"c3;") and len(raw) <= 44, raw
    assert redis_client.exists(keys.result(JOB)) == 0
    bucket = keys.reference_bucket(JOB)
    assert redis_client.hget(bucket, JOB) == raw
    assert redis_client.object("encoding", bucket) in (b"listpack", "listpack")


def test_a_reference_that_expires_keeps_its_key_embedded(redis_client, namespace, folder):
    """A bucket's field cannot expire on Redis 7.0 (``HEXPIRE`` is 7.4's): with ``clean_ttl`` the
    reference stays in the job's key, kept embedded, with the TTL."""
    store = RedisJobResultStore(redis_client, namespace, result_documents=folder, clean_ttl=3600)
    keys = KeySpace(namespace)
    raw = committed(store, redis_client)
    assert raw == redis_client.get(keys.result(JOB)) and raw.startswith(b"c3;")
    assert redis_client.object("encoding", keys.result(JOB)) in (b"embstr", "embstr")
    assert 0 < redis_client.pttl(keys.result(JOB)) <= 3_600_000
    assert redis_client.exists(keys.reference_bucket(JOB)) == 0


def test_a_reference_in_its_own_key_is_read_as_one_in_its_bucket(store, redis_client, namespace):
    """References committed before buckets (or with a TTL) live in the job's key: every reader
    and every script reads them as before."""
    from datetime import timedelta

    keys = KeySpace(namespace)
    raw = committed(store, redis_client)
    redis_client.hdel(keys.reference_bucket(JOB), JOB)
    redis_client.set(keys.result(JOB), raw)
    entry = store.get_entry(JOB)
    assert entry is not None and entry.summary and decide(entry, FP).skip
    assert store.read_many([JOB])[JOB] == entry and [e.job_id for e in store.list_entries()] == [JOB]
    assert store.mark_result_as_clean(JOB) is False  # already clean
    assert store.purge_clean_entries(timedelta(0)) == 1 and stored(redis_client, namespace) is None


def test_every_reader_and_write_finds_a_reference_in_its_bucket(store, redis_client, namespace):
    """The task's read, the batch read, a listing, the async read, a forget and a purge all see
    the bucket's field as the job's entry, and a forget or a purge leaves no field behind."""
    import asyncio
    from datetime import timedelta

    from airflow_jrs.store.redis.results_aio import AsyncRedisJobResultStore

    keys = KeySpace(namespace)
    committed(store, redis_client)
    entry = store.get_entry(JOB)
    assert entry is not None and entry.summary
    assert store.read_many([JOB])[JOB] == entry
    assert [e.job_id for e in store.list_entries()] == [JOB]

    async def read_async():
        given = redis_client.connection_pool.connection_kwargs
        aio = AsyncRedisJobResultStore({k: given[k] for k in ("host", "port", "db")}, namespace)
        try:
            return await aio.get_entry(JOB)
        finally:
            await aio.aclose()

    assert asyncio.run(read_async()) == entry
    assert store.forget_result(JOB) is not None
    assert stored(redis_client, namespace) is None and redis_client.exists(keys.reference_bucket(JOB)) == 0
    assert store.get_entry(JOB) is None and store.list_entries() == []

    store.create_dirty_result(full(fence=None))
    store.mark_result_as_clean(JOB)
    assert redis_client.hexists(keys.reference_bucket(JOB), JOB)
    assert store.purge_clean_entries(timedelta(0)) == 1
    assert stored(redis_client, namespace) is None and store.get_entry(JOB) is None


def test_a_create_that_supersedes_a_reference_in_its_bucket_removes_the_field(store, redis_client, namespace):
    keys = KeySpace(namespace)
    committed(store, redis_client)
    store.create_dirty_result(full(fingerprint=hashlib.sha256(b"new code").hexdigest()), supersede=True)
    assert not redis_client.hexists(keys.reference_bucket(JOB), JOB)
    entry = store.get_entry(JOB)
    assert entry is not None and entry.is_dirty and not entry.summary
    assert redis_client.lindex(keys.history(JOB), 0).startswith(b"c3;")


def test_a_stale_field_beside_the_key_is_dropped_by_the_next_create_and_commit(redis_client, namespace, folder):
    """An older airflow-jrs does not look in buckets: it may write a job's key while a field is
    still there. The next commit (with ``clean_ttl``: into the key) and the next create drop the
    field, so it cannot come back as the job's result once the key expires or goes."""
    from airflow_jrs.domain.model import utcnow
    from airflow_jrs.store.results.serde import encode_entry

    keys = KeySpace(namespace)
    store = RedisJobResultStore(redis_client, namespace, result_documents=folder)
    committed(store, redis_client)
    newer = full(fingerprint=hashlib.sha256(b"new code").hexdigest(), fence=None)
    for write in ("commit", "create"):
        redis_client.set(keys.result(JOB), encode_entry(newer, EntryState.DIRTY, utcnow()))  # the older host
        redis_client.sadd(keys.dirty, JOB)
        if not redis_client.hexists(keys.reference_bucket(JOB), JOB):
            redis_client.hset(keys.reference_bucket(JOB), JOB, b"c3;hogaqjkf2c;7;LXEWQrcmsEQBYnyp-6wy9c")
        if write == "commit":
            expiring = RedisJobResultStore(redis_client, namespace, result_documents=folder, clean_ttl=3600)
            assert expiring.mark_result_as_clean(JOB) is True
        else:
            store.create_dirty_result(full(fence=None), supersede=True)
        assert not redis_client.hexists(keys.reference_bucket(JOB), JOB), write
        assert redis_client.exists(keys.result(JOB)) == 1


def test_a_corrupt_field_in_a_bucket_is_quarantined_and_leaves_the_bucket(store, redis_client, namespace):
    from airflow_jrs.exceptions import CorruptJobResultError

    keys = KeySpace(namespace)
    redis_client.hset(keys.reference_bucket(JOB), JOB, b"c3;not-base36!;;")
    with pytest.raises(CorruptJobResultError, match="invalid reference"):
        store.get_entry(JOB)
    assert redis_client.get(keys.quarantine(JOB)) == b"c3;not-base36!;;"
    assert not redis_client.hexists(keys.reference_bucket(JOB), JOB)


def test_a_reference_stays_within_44_bytes_up_to_a_fence_of_36_to_the_7th_until_2085():
    from datetime import UTC, datetime

    from airflow_jrs.domain.model import JobResultEntry

    created = datetime(2085, 1, 1, tzinfo=UTC)  # 36**10 µs after 1970 is in 2085
    ref = encode_reference(JobResultEntry(full(fence=36**7 - 1), EntryState.DIRTY, created_at=created))
    assert ref is not None and len(ref) <= 44, ref
    back = decode_reference(ref, JOB)
    assert (
        back.created_at == created and back.result.fence == 36**7 - 1 and FP.startswith(back.result.fingerprint or "-")
    )


def test_without_result_documents_the_entry_stays_json(redis_client, namespace):
    plain = RedisJobResultStore(redis_client, namespace)
    plain.create_dirty_result(full(fence=None))
    plain.mark_result_as_clean(JOB)
    raw = redis_client.get(KeySpace(namespace).result(JOB))
    assert raw.startswith(b'{"s":"c","v":5,') and json.loads(raw)["O"] == {"flights": "/out/{j}/fence-7"}


def test_the_skip_decision_of_a_reference_is_one_round_trip_and_reads_no_document(
    store, redis_client, folder, monkeypatch
):
    committed(store, redis_client)
    sent: list[bytes] = []
    real_send = AbstractConnection.send_packed_command
    me = threading.get_ident()

    def counting_send(self, command, check_health=True):
        if threading.get_ident() == me:
            sent.append(b"".join(command) if isinstance(command, list) else command)
        return real_send(self, command, check_health)

    def no_document(*args, **kwargs):
        raise AssertionError("the decision read a result document")

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting_send)
    monkeypatch.setattr(folder, "get", no_document)
    entry = store.get_entry(JOB)
    assert len(sent) == 1, sent
    assert entry is not None and entry.summary and entry.is_clean and entry.result.fence == 7
    assert decide(entry, FP).skip
    assert not decide(entry, hashlib.sha256(b"changed code").hexdigest()).skip


def test_readers_that_need_the_full_result_read_the_document(store, redis_client):
    committed(store, redis_client)
    entry = store.get_full_entry(JOB)
    assert entry is not None and not entry.summary and entry.is_clean
    assert entry.result == full(fence=7)


def test_a_missing_document_is_an_error_naming_its_path_and_the_fix(store, redis_client, folder):
    committed(store, redis_client)
    where = document_path(store, folder)
    where.unlink()
    entry = store.get_entry(JOB)  # the decision still reads the reference
    assert entry is not None and entry.summary
    with pytest.raises(ResultDocumentError) as info:
        store.full_entry(entry)
    message = str(info.value)
    assert str(where) in message and f"airflow-jrs forget {JOB}" in message and "Restore" in message
    assert info.value.location == str(where) and info.value.job_id == JOB
    assert stored(redis_client, store.namespace).startswith(b"c3;")  # nothing changed


def test_a_document_of_another_fence_is_never_shown_as_the_result(store, redis_client, folder):
    committed(store, redis_client)
    path = document_path(store, folder)
    doc = json.loads(path.read_bytes())
    path.write_text(json.dumps({**doc, "n": 6}, separators=(",", ":")))
    with pytest.raises(ResultDocumentError, match="fence 6"):
        store.get_full_entry(JOB)


class _Broken:
    """Documents that cannot be written (a full disk, a read-only mount)."""

    def __init__(self, inner: ResultDocuments) -> None:
        self.inner = inner

    def location(self, namespace: str, job_id: str, name: str) -> str:
        return self.inner.location(namespace, job_id, name)

    def put(self, namespace: str, job_id: str, name: str, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    def get(self, namespace: str, job_id: str, name: str) -> bytes:
        return self.inner.get(namespace, job_id, name)

    def delete(self, namespace: str, job_id: str, name: str) -> None:
        self.inner.delete(namespace, job_id, name)


def test_a_failed_document_write_leaves_the_entry_dirty(redis_client, namespace, folder):
    broken = RedisJobResultStore(redis_client, namespace, result_documents=_Broken(folder))
    broken.create_dirty_result(full(fence=None))
    with pytest.raises(ResultDocumentError, match="stays dirty") as info:
        broken.mark_result_as_clean(JOB)
    assert "No space left" in str(info.value)
    entry = broken.get_entry(JOB)
    assert entry is not None and entry.is_dirty and not entry.summary
    assert JOB in [r.job_id for r in broken.get_dirty_results()]


def test_killed_between_document_and_reference_the_entry_stays_dirty_and_a_retry_commits(
    store, redis_client, namespace, folder, monkeypatch
):
    store.create_dirty_result(full(fence=None))
    dirty = store.get_entry(JOB)

    class Killed(BaseException):
        pass

    def killed(*args, **kwargs):
        raise Killed  # the worker died after the document was written, before the script ran

    monkeypatch.setattr(store, "_clean", killed)
    with pytest.raises(Killed):
        store.mark_result_as_clean(JOB, expected=dirty)
    documents = list((folder.root / namespace).rglob("*.json"))
    assert len(documents) == 1  # the document came first
    assert store.get_entry(JOB) == dirty and JOB in [r.job_id for r in store.get_dirty_results()]

    retry = RedisJobResultStore(redis_client, namespace, result_documents=folder)  # the cleanup's retry
    assert retry.mark_result_as_clean(JOB, expected=dirty) is True
    assert retry.mark_result_as_clean(JOB, expected=dirty) is False  # and again: a no-op
    assert stored(redis_client, namespace).startswith(b"c3;")
    assert retry.get_dirty_results() == []
    assert list((folder.root / namespace).rglob("*.json")) == documents
    assert retry.get_full_entry(JOB).result == dirty.result  # type: ignore[union-attr]


def test_a_superseded_reference_keeps_its_note_in_history_and_finds_its_document(store, redis_client):
    committed(store, redis_client)
    store.create_dirty_result(full(fingerprint=hashlib.sha256(b"new code").hexdigest()), supersede=True)
    raw = redis_client.lindex(KeySpace(store.namespace).history(JOB), 0)
    assert raw.startswith(b"c3;") and b"\n{" in raw
    item = decode_history_item(raw, JOB)
    assert item.moved is not None and item.moved.reason == "superseded"
    (old,) = store.get_history(JOB)
    assert old.summary and store.full_entry(old).result == full(fence=7)


def test_purge_deletes_the_documents_of_what_it_purges(store, redis_client, folder):
    from datetime import timedelta

    committed(store, redis_client)
    path = document_path(store, folder)
    assert path.exists()
    assert store.purge_clean_entries(timedelta(0)) == 1
    assert not path.exists()


def test_show_and_the_job_view_read_the_document(redis_client, redis_url, namespace, tmp_path, capsys):
    documents = str(tmp_path / "documents")
    Path(documents).mkdir()
    settings = settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path), result_documents=documents)
    jobs = RedisJobNamespace.from_url(redis_url, settings)
    try:
        committed(jobs.results, redis_client)
        view = inspect_job(jobs, JOB)
        assert view.problem is None and view.entry is not None and view.entry.result == full(fence=7)
        assert view.dag_id == "flights"
    finally:
        jobs.close()
    args = ["--redis-url", redis_url, "--namespace", namespace, "--result-documents", documents]
    assert main([*args, "show", "--json", JOB]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["entry"]["outputs"] == {"flights": f"/out/{JOB}/fence-7"} and shown["entry"]["state"] == "clean"

    (Path(documents) / namespace).rename(tmp_path / "moved-away")
    assert main([*args, "show", JOB]) != 0
    err = capsys.readouterr().err
    assert "is missing at" in err and f"airflow-jrs forget {JOB}" in err


def test_result_documents_accepts_a_folder_or_a_file_url_and_refuses_other_schemes(tmp_path):
    from airflow_jrs.exceptions import JrsConfigError

    assert FolderDocuments.from_setting(str(tmp_path)).root == tmp_path
    assert FolderDocuments.from_setting(f"file://{tmp_path}").root == tmp_path
    with pytest.raises(JrsConfigError, match="folder path or a file:// URL"):
        FolderDocuments.from_setting("s3://bucket/results")
    with pytest.raises(JrsConfigError, match="absolute"):
        FolderDocuments.from_setting("relative/folder")


def test_a_corrupt_reference_is_quarantined_like_any_corrupt_entry(store, redis_client):
    from airflow_jrs.exceptions import CorruptJobResultError

    keys = KeySpace(store.namespace)
    redis_client.set(keys.result(JOB), b"c3;not-base36!;;")
    with pytest.raises(CorruptJobResultError, match="invalid reference"):
        store.get_entry(JOB)
    assert redis_client.get(keys.quarantine(JOB)) == b"c3;not-base36!;;"
    assert redis_client.get(keys.result(JOB)) is None


def test_a_store_without_the_setting_still_decides_on_a_reference_and_names_the_setting_for_the_rest(
    store, redis_client, namespace
):
    committed(store, redis_client)
    plain = RedisJobResultStore(redis_client, namespace)
    entry = plain.get_entry(JOB)
    assert entry is not None and entry.summary and decide(entry, FP).skip
    assert plain.mark_result_as_clean(JOB) is False  # already clean, as a reference
    with pytest.raises(ResultDocumentError, match="AIRFLOW__JRS__RESULT_DOCUMENTS"):
        plain.full_entry(entry)


@pytest.mark.parametrize(("new_fp", "replaced"), [(FP, False), ("not-a-sha", True), (None, True)])
def test_create_compares_a_reference_as_it_compares_schema_2_json(store, redis_client, namespace, new_fp, replaced):
    """The create script's supersede rule reads a reference's fingerprint prefix; the answer is
    the one a schema-2 entry of the same result gets."""
    from airflow_jrs.exceptions import JobResultEntryAlreadyExistsError

    answers = []
    for documents in (True, False):
        ns = f"{namespace}-{documents}"
        s = RedisJobResultStore(redis_client, ns, result_documents=store.result_documents if documents else None)
        s.create_dirty_result(full(fence=None))
        s.mark_result_as_clean(JOB)
        assert stored(redis_client, ns).startswith(b"c3;" if documents else b'{"s":"c"')
        try:
            s.create_dirty_result(full(fence=None, fingerprint=new_fp), supersede=True)
            answers.append(True)
        except JobResultEntryAlreadyExistsError:
            answers.append(False)
    assert answers == [replaced, replaced]


def test_a_skipped_attempt_returns_the_full_result_from_the_document(redis_url, namespace, tmp_path):
    """What a skipped task returns downstream (outputs, attempt) is its full result, although the
    decision read only the reference."""
    from airflow_jrs.protocol import COMPUTED, SKIPPED, JobAttempt, JobSpec
    from jrs_testbench.launchers import Recording

    (tmp_path / "documents").mkdir()
    settings = settings_for(
        namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"),
        result_documents=f"file://{tmp_path / 'documents'}",
    )  # fmt: skip
    jobs = RedisJobNamespace.from_url(redis_url, settings)
    try:
        launcher = Recording()
        first = JobAttempt(jobs, JobSpec(JOB, FP), Attempt("d", "t", "r1", 1), launcher).run()
        assert first.kind == COMPUTED
        jobs.results.mark_result_as_clean(JOB, expected=jobs.results.get_entry(JOB))
        assert jobs.results.get_entry(JOB).summary  # type: ignore[union-attr]
        again = JobAttempt(jobs, JobSpec(JOB, FP), Attempt("d", "t", "r2", 1), launcher).run()
        assert again.kind == SKIPPED and launcher.launched == 1
        assert again.entry is not None and not again.entry.summary
        assert again.result.attempt == Attempt("d", "t", "r1", 1) and again.result.fingerprint == FP
    finally:
        jobs.close()


# -- review of the compact clean entry: what the first version got wrong ---------------------------


def test_a_documents_folder_missing_on_this_host_is_never_created_and_the_entry_stays_dirty(
    redis_client, namespace, tmp_path
):
    """A mount that failed on one worker must not turn into a local folder: the reference would
    name a document only that (perhaps ephemeral) host has, and every other host would be told
    the result is missing. The cleanup fails naming the folder; the entry stays dirty."""
    root = tmp_path / "not-mounted"
    s = RedisJobResultStore(redis_client, namespace, result_documents=FolderDocuments(root))
    s.create_dirty_result(full(fence=None))
    with pytest.raises(ResultDocumentError, match="stays dirty") as info:
        s.mark_result_as_clean(JOB, expected=s.get_entry(JOB))
    assert str(root) in str(info.value) and "mount" in str(info.value)
    assert not root.exists()
    entry = s.get_entry(JOB)
    assert entry is not None and entry.is_dirty and not entry.summary


def test_a_reader_without_the_shared_folder_is_told_to_mount_it_never_to_forget(
    store, redis_client, namespace, tmp_path
):
    """A host where [jrs] result_documents is not the shared folder must not advise a forget
    (that recomputes a result that exists): it names the folder and says to mount it."""
    committed(store, redis_client)
    elsewhere = RedisJobResultStore(redis_client, namespace, result_documents=FolderDocuments(tmp_path / "local"))
    with pytest.raises(ResultDocumentError) as info:
        elsewhere.get_full_entry(JOB)
    message = str(info.value)
    assert str(tmp_path / "local") in message and "mount" in message and "forget" not in message


def test_a_fence_counter_that_went_back_never_blocks_a_commit(store, redis_client, namespace, folder):
    """Redis restored from an older backup (or a namespace recreated) hands out fences again;
    the document of an earlier result of the same job and fence must neither block the new
    commit forever nor be overwritten: each result keeps its own document."""
    committed(store, redis_client)
    old_docs = {p: p.read_bytes() for p in (folder.root / namespace).rglob("*.json")}
    assert len(old_docs) == 1
    for key in redis_client.scan_iter(match=f"jrs:{{{namespace}}}:*"):
        redis_client.delete(key)  # the restore: this job's entry and the counter are gone
    new = full(metrics={"rows": 99})
    redis_client.set(KeySpace(namespace).fence_counter, 6)
    lease = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    token = lease.acquire()
    assert int(token) == 7
    store.create_dirty_result(new, fence=token)
    lease.release()
    assert store.mark_result_as_clean(JOB, expected=store.get_entry(JOB)) is True
    assert store.get_full_entry(JOB).result == replace_fence(new, 7)  # type: ignore[union-attr]
    assert all(p.read_bytes() == data for p, data in old_docs.items())


def replace_fence(result: JobResult, fence: int) -> JobResult:
    from dataclasses import replace

    return replace(result, fence=fence)


def test_marking_clean_with_the_reference_read_is_a_no_op(store, redis_client):
    """``expected`` already clean is a no-op (the store's contract); a reference is clean."""
    committed(store, redis_client)
    entry = store.get_entry(JOB)
    assert entry is not None and entry.summary
    assert store.mark_result_as_clean(JOB, expected=entry) is False


@pytest.mark.parametrize("bogus", [b"c3;zz;!!;xyz", b"c3;;;", b"c3;hogaqjkf2c;7;" + b"A" * 21])
def test_create_never_supersedes_a_malformed_reference_it_quarantines_it(store, redis_client, bogus):
    """The create script reads a reference by its fields; one that only looks like a reference
    is corrupt data: quarantined (the read's rule), never moved aside as an old result."""
    from airflow_jrs.exceptions import CorruptJobResultError

    keys = KeySpace(store.namespace)
    redis_client.set(keys.result(JOB), bogus)
    with pytest.raises(CorruptJobResultError):
        store.create_dirty_result(full(fence=None, fingerprint=hashlib.sha256(b"new").hexdigest()), supersede=True)
    assert redis_client.get(keys.quarantine(JOB)) == bogus
    assert redis_client.llen(keys.history(JOB)) == 0


@pytest.mark.parametrize("documents", [True, False])
@pytest.mark.parametrize("bogus", [b"c3;zz;!!;xyz", b"c3;;;"])
def test_clean_never_reports_a_malformed_reference_as_already_clean(store, redis_client, namespace, bogus, documents):
    """``airflow-jrs clean`` (no bytes read) on bytes that only start like a reference: they are
    corrupt, so they are quarantined and named, not answered "already clean"."""
    from airflow_jrs.exceptions import CorruptJobResultError

    s = store if documents else RedisJobResultStore(redis_client, namespace)
    keys = KeySpace(namespace)
    redis_client.set(keys.result(JOB), bogus)
    with pytest.raises(CorruptJobResultError):
        s.mark_result_as_clean(JOB)
    assert redis_client.get(keys.quarantine(JOB)) == bogus


def test_a_document_write_makes_every_folder_on_its_path_durable_also_on_a_retry(folder, namespace, monkeypatch):
    """The job's and the namespace's folders are new on a first commit: their names must reach
    the disk before the reference does (fsync of each parent), and a retry that finds the same
    bytes (killed after the rename, before the fsync) must not skip that."""
    from airflow_jrs.store.results import documents

    synced: list[Path] = []
    monkeypatch.setattr(documents, "_fsync_dir", lambda f: synced.append(Path(f)))
    folder.put(namespace, JOB, "7-x", b"{}")
    where = Path(folder.location(namespace, JOB, "7-x"))
    path_folders = {where.parent, where.parent.parent, folder.root}
    assert path_folders <= set(synced), synced
    synced.clear()
    folder.put(namespace, JOB, "7-x", b"{}")  # the retry: same bytes, a no-op write
    assert path_folders <= set(synced), synced
