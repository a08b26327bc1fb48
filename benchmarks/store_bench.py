"""Job result store at scale: memory per clean entry, dirty listing, skip-path latency.

Starts its own redis-server (``EmbeddedRedis``, append-only on) in a temporary directory and:

1. bulk-loads N realistic clean entries (``make_result``: the output in the staging folder the
   operator names after the lease's token and nonce) exactly as ``CREATE_DIRTY_RESULT`` +
   ``MARK_RESULT_AS_CLEAN`` leave them (a string at ``keys.result(job_id)`` from
   ``serde.encode_entry(..., CLEAN, created)`` and the job id in ``keys.index`` scored by the
   creation time in ms), after checking on a sample of 1,000 jobs that the real
   ``create_dirty_result`` + ``mark_result_as_clean`` path leaves byte-identical values, equal
   index scores, equal ``MEMORY USAGE`` and the same key set. ``appendonly`` is switched off for
   the bulk load only (``CONFIG SET appendonly no``) and back on, with its rewrite finished,
   before anything is timed. Reports ``used_memory`` delta per entry, ``MEMORY USAGE`` of entry
   keys and the index sorted set's share.
2. ``get_dirty_results()`` with N clean + D dirty entries against a namespace holding only the
   same D dirty entries (baseline, calls alternate); a naive SCAN + MGET listing for contrast.
3. The skip-path decision read, ``get_entry`` of a clean entry, against a ``PING`` round trip on
   the same client (calls alternate); medians of fenced ``create_dirty_result`` and of
   ``mark_result_as_clean``.

4. With ``--compact``: the same N jobs as clean *references* (``[jrs] result_documents``, issue
   22), loaded through the product's own encoder (``reference.encode_reference``) after the same
   kind of check against ``create_dirty_result`` + ``mark_result_as_clean`` on a store with
   documents (sent to a :class:`DiscardedDocuments`: Redis memory is what is measured), into a
   namespace of their own in the same server, each a field of its reference bucket as the commit
   leaves it (``keys.reference_bucket``): ``used_memory`` delta / N against the JSON entry's
   delta of the same run, and the skip decision's read of a reference against a PING.

    .venv/bin/python benchmarks/store_bench.py                 # 1,000,000 clean entries
    .venv/bin/python benchmarks/store_bench.py --quick         # 20,000
    .venv/bin/python benchmarks/store_bench.py --compact       # and the same jobs as references
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis as redis_lib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # jrs_testbench is not installed: it lives beside benchmarks/

from airflow_jrs.domain.model import Attempt, EntryState, JobResult, JobResultEntry, JobStatus  # noqa: E402
from airflow_jrs.domain.paths import staging_path  # noqa: E402
from airflow_jrs.spark.fence import Fence  # noqa: E402
from airflow_jrs.store.redis.keys import KeySpace  # noqa: E402
from airflow_jrs.store.redis.leases import RedisJobLease  # noqa: E402
from airflow_jrs.store.redis.results import DEFAULT_INDEX_LIMIT, RedisJobResultStore  # noqa: E402
from airflow_jrs.store.results.reference import encode_reference  # noqa: E402
from airflow_jrs.store.results.serde import DIRTY_PREFIX, decode_entry, encode_entry  # noqa: E402
from jrs_testbench.redis_server import EmbeddedRedis, find_redis_server  # noqa: E402

SAMPLE = 1_000  # jobs checked through the real path, and keys sampled with MEMORY USAGE
SKIP_CALLS = 5_000
WRITES = 1_000
CHUNK = 2_000  # entries per pipeline round trip in the bulk load
T0 = datetime(2026, 11, 22, 7, 0, 0, 123456, tzinfo=UTC)
DAY0 = datetime(2013, 1, 1, tzinfo=UTC)


# -- realistic entries ------------------------------------------------------------------------
def job_id(i: int) -> str:
    return f"flights_daily.ingest.submit.2013-01-01-{i}"


def nonce(i: int) -> str:
    """The bulk load's owner nonce of job ``i``'s lease: 16 hex digits, as a lease draws them."""
    return hashlib.sha256(f"nonce-{i}".encode()).hexdigest()[:16]


def make_result(i: int, fence: Fence | None = None) -> tuple[JobResult, datetime]:
    """A SUCCEEDED result as the Spark operator writes it, and its creation time.

    Its fence is the lease's (``fence``: token and owner nonce), by default token ``i + 1``
    (what the namespace's counter hands out when every job is leased once in order) with
    :func:`nonce`. The output lies in the attempt's staging folder as the operator names it
    (``paths.staging_path``: ``<root>/<namespace>/<job dir>/fence-<token>-<nonce>``), so the
    nonce's 17 characters are counted. The application id is Spark local mode's
    (``local-<the SparkContext's start in ms>``), a few seconds after the operator's start."""
    job = job_id(i)
    fence = Fence(i + 1, nonce(i)) if fence is None else fence
    start = T0 + timedelta(microseconds=i * 1_234_567)
    end = start + timedelta(seconds=37, microseconds=(i * 997) % 1_000_000)
    start_ms = (start - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    result = JobResult(
        job_id=job,
        status=JobStatus.SUCCEEDED,
        application_id=f"local-{start_ms + 2_000 + (i * 7_919) % 3_000}",
        outputs={"flights": f"{staging_path('/data/jrs/output', 'prod', job, fence)}/flights"},
        metrics={"rows": 842},
        fingerprint=hashlib.sha256(f"spec-of-{job}".encode()).hexdigest(),
        start_time=start,
        end_time=end,
        attempt=Attempt(
            dag_id="flights_daily",
            task_id="ingest.submit",
            run_id=f"scheduled__{(DAY0 + timedelta(days=i % 3650)).isoformat()}",
            try_number=1,
        ),
        fence=int(fence),
    )
    return result, end + timedelta(microseconds=4_321)


def created_ms(created: datetime) -> int:
    return int(created.timestamp() * 1000)  # as RedisJobResultStore._create_dirty_result scores it


def clean_json(result: JobResult, created: datetime) -> str:
    """What MARK_RESULT_AS_CLEAN leaves without result documents: the JSON entry, clean."""
    return encode_entry(result, EntryState.CLEAN, created)


def clean_reference(result: JobResult, created: datetime) -> str:
    """What it leaves with result documents: the dirty entry's reference (store/results/reference.py)."""
    ref = encode_reference(JobResultEntry(result, EntryState.DIRTY, created_at=created))
    assert ref is not None, "make_result's results are SUCCEEDED with a SHA-256 fingerprint"
    return ref


class DiscardedDocuments:
    """Result documents that go nowhere: ``--compact`` measures Redis, not a disk."""

    def location(self, namespace: str, job_id: str, name: str) -> str:
        return f"discarded:{namespace}/{job_id}/{name}"

    def put(self, namespace: str, job_id: str, name: str, data: bytes) -> None:
        pass

    def get(self, namespace: str, job_id: str, name: str) -> bytes:
        raise FileNotFoundError(self.location(namespace, job_id, name))

    def delete(self, namespace: str, job_id: str, name: str) -> None:
        pass


def bulk_load(
    client: redis_lib.Redis,
    keys: KeySpace,
    indices: Iterable[int],
    created_for: Callable[[int], datetime] | None = None,
    encode: Callable[[JobResult, datetime], str] = clean_json,
    fence_for: Callable[[int], Fence] | None = None,
) -> int:
    """Write clean entries exactly as CREATE + CLEAN leave them: MSET of entries (references: HSET of
    their buckets' fields, keys.reference_bucket), ZADD of the index
    (trimmed to the store's ``index_limit`` at the end, as the create script keeps it). ``created_for``
    and ``fence_for`` replace job ``i``'s creation time and lease with those the real path had."""
    pipe = client.pipeline(transaction=False)
    count = 0
    in_buckets = encode is clean_reference  # a reference without clean_ttl is a bucket's field

    def flush(values: dict[str, str], scores: dict[str, int]) -> None:
        if in_buckets:
            fields: dict[str, dict[str, str]] = {}
            for job, value in values.items():
                fields.setdefault(keys.reference_bucket(job), {})[job] = value
            for bucket, mapping in fields.items():
                pipe.hset(bucket, mapping=mapping)
        else:
            pipe.mset({keys.result(job): value for job, value in values.items()})
        pipe.zadd(keys.index, scores)
        pipe.execute()

    values: dict[str, str] = {}
    scores: dict[str, int] = {}
    for i in indices:
        result, created = make_result(i, fence_for(i) if fence_for is not None else None)
        if created_for is not None:
            created = created_for(i)
        values[result.job_id] = encode(result, created)
        scores[result.job_id] = created_ms(created)
        count += 1
        if len(values) >= CHUNK:
            flush(values, scores)
            values, scores = {}, {}
    if values:
        flush(values, scores)
    while client.zcard(keys.index) > DEFAULT_INDEX_LIMIT:
        client.zremrangebyrank(keys.index, 0, min(client.zcard(keys.index) - DEFAULT_INDEX_LIMIT, 10_000) - 1)
    return count


def real_write(client: redis_lib.Redis, store: RedisJobResultStore, i: int, clean: bool) -> Fence:
    """The production path: lease (fence), fenced create, release, then cleanup marks clean.
    The result is made after the lease, as the operator makes it: its output folder is named
    after the fence the lease drew (token and nonce), which is returned."""
    lease = RedisJobLease(client, store.namespace, job_id(i))
    token = lease.acquire()
    assert isinstance(token, Fence) and token.nonce, f"a lease hands out a fence with a nonce, got {token!r}"
    result, _ = make_result(i, token)
    store.create_dirty_result(result, fence=token)
    lease.release()
    if clean:
        store.mark_result_as_clean(result.job_id)
    return token


def scan_keys(client: redis_lib.Redis, keys: KeySpace) -> Iterator[str]:
    prefix = f"{keys.base}:"
    for key in client.scan_iter(match=f"{keys.base}:*", count=1000):
        yield key.decode()[len(prefix) :]


# -- small helpers ----------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def info(client: redis_lib.Redis, section: str) -> dict:
    return client.info(section)


def wait_for_aof(client: redis_lib.Redis, timeout: float = 600.0) -> float:
    started = time.perf_counter()
    while True:
        p = info(client, "persistence")
        if (
            p.get("aof_enabled") == 1
            and not p.get("aof_rewrite_in_progress")
            and not p.get("aof_rewrite_scheduled")
            and p.get("aof_last_bgrewrite_status") == "ok"
        ):
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"AOF rewrite did not finish in {timeout}s: {p}")
        time.sleep(0.2)


def used_memory(client: redis_lib.Redis) -> tuple[int, int]:
    time.sleep(1.0)  # let incremental rehashing of the keyspace finish
    m = info(client, "memory")
    return int(m["used_memory"]), int(m.get("mem_clients_normal", 0))


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# -- the benchmark ----------------------------------------------------------------------------
def verify_bulk_path(client: redis_lib.Redis, compact: bool = False) -> dict:
    """Real create+clean on SAMPLE jobs vs the bulk path on the same jobs: must be identical.
    ``compact``: the store writes references (its documents discarded), the bulk path too."""
    suffix = "-compact" if compact else ""
    real, bulk = KeySpace(f"verify-real{suffix}"), KeySpace(f"verify-bulk{suffix}")
    documents = DiscardedDocuments() if compact else None
    store = RedisJobResultStore(client, real.namespace, result_documents=documents)
    fences = {i: real_write(client, store, i, clean=True) for i in range(SAMPLE)}
    created = {}
    for i in range(SAMPLE):
        raw = client.get(real.result(job_id(i))) or client.hget(real.reference_bucket(job_id(i)), job_id(i))
        entry = decode_entry(raw, job_id(i))
        assert entry.is_clean and entry.created_at is not None
        created[i] = entry.created_at
    encode = clean_reference if compact else clean_json
    bulk_load(client, bulk, range(SAMPLE), created_for=created.__getitem__, encode=encode, fence_for=fences.__getitem__)

    mismatches = []
    for i in range(SAMPLE):
        job = job_id(i)
        rk, bk = real.result(job), bulk.result(job)
        pipe = client.pipeline(transaction=False)
        for key in (rk, bk):
            pipe.get(key).type(key).object("encoding", key).memory_usage(key).pttl(key)
        pipe.zscore(real.index, job).zscore(bulk.index, job)
        for ks in (real, bulk):  # a reference's bucket: its field, and the bucket as a whole
            b = ks.reference_bucket(job)
            pipe.hget(b, job).object("encoding", b).memory_usage(b).pttl(b)
        got = pipe.execute()
        if got[0:5] != got[5:10] or got[10] != got[11] or got[10] is None or got[12:16] != got[16:20]:
            mismatches.append((job, got))
    real_keys = set(scan_keys(client, real))
    bulk_keys = set(scan_keys(client, bulk))
    # Only the namespace's one fencing counter may be extra: a per-job key the lease (or anything
    # else on the real path) left after its release would be memory the bulk load does not count.
    lease_keys = {k for k in real_keys if k == "fence"}
    if mismatches or real_keys - lease_keys != bulk_keys:
        raise SystemExit(
            "bulk path is NOT faithful:\n"
            f"  value/score mismatches: {len(mismatches)} (first: {mismatches[:1]})\n"
            f"  keys only via real path: {sorted(real_keys - lease_keys - bulk_keys)[:5]}\n"
            f"  keys only via bulk path: {sorted(bulk_keys - real_keys)[:5]}"
        )
    fence_key = real.fence_counter
    return {
        "lease_keys": sorted({k.split(":", 1)[0] for k in lease_keys}),
        "lease_key_count": len(lease_keys),
        "fence_usage": client.memory_usage(fence_key),
        "fence_encoding": client.object("encoding", fence_key).decode(),
        "value_usage": client.memory_usage(real.result(job_id(0))),
    }


def bucket_figures(client: redis_lib.Redis, keys: KeySpace) -> dict:
    """MEMORY USAGE of every reference bucket of the namespace, its fields and encodings."""
    buckets = keys.reference_buckets()
    pipe = client.pipeline(transaction=False)
    for b in buckets:
        pipe.memory_usage(b, samples=0).hlen(b).object("encoding", b)
    got = pipe.execute()
    usage, fields = sum(u or 0 for u in got[0::3]), sum(got[1::3])
    encodings = sorted({e.decode() for e in got[2::3] if e})
    return {"usage": usage, "fields": fields, "encodings": encodings, "buckets": sum(1 for f in got[1::3] if f)}


def measure_compact(client: redis_lib.Redis, port: int, n: int) -> dict:
    """The same N jobs as clean references, in namespace ``compact`` (appendonly still off)."""
    verify_bulk_path(client, compact=True)
    keys = KeySpace("compact")
    before, _ = used_memory(client)
    loader = redis_lib.Redis(port=port)
    bulk_load(loader, keys, range(n), encode=clean_reference)
    loader.close()
    loader.connection_pool.disconnect()
    after, _ = used_memory(client)
    sample = [job_id(i) for i in random.Random(22).sample(range(n), min(SAMPLE, n))]
    pipe = client.pipeline(transaction=False)
    for j in sample:
        pipe.hstrlen(keys.reference_bucket(j), j)
    lengths = pipe.execute()
    buckets = bucket_figures(client, keys)
    assert buckets["fields"] == n, f"{buckets['fields']} references in the buckets, {n} loaded"
    return {
        "delta": after - before,
        "mean_usage": buckets["usage"] / n,
        "lengths": lengths,
        "encoding": "/".join(buckets["encodings"]) + f" hashes, {buckets['buckets']:,} buckets",
        "index_usage": client.memory_usage(keys.index, samples=0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000, help="clean entries to load (default 1,000,000)")
    parser.add_argument("--dirty", type=int, default=100, help="dirty entries (default 100)")
    parser.add_argument("--repeat", type=int, default=30, help="get_dirty_results calls per namespace (default 30)")
    parser.add_argument("--quick", action="store_true", help="20,000 clean entries")
    parser.add_argument(
        "--compact", action="store_true", help="also the same jobs as clean references ([jrs] result_documents)"
    )
    args = parser.parse_args()
    n = 20_000 if args.quick else args.entries
    d = args.dirty
    rng = random.Random(20261122)
    work = Path(tempfile.mkdtemp(prefix="jrs-store-bench-"))
    binary = find_redis_server()
    started_all = time.perf_counter()
    try:
        with EmbeddedRedis(work / "redis", appendfsync="everysec") as server:
            client = redis_lib.Redis(port=server.port)
            srv = info(client, "server")
            print(
                f"redis-server {srv['redis_version']} ({binary}), redis-py {redis_lib.__version__}, "
                f"Python {platform.python_version()}, {platform.machine()} x{os.cpu_count()} cpus, "
                f"loopback TCP, appendonly=yes appendfsync=everysec"
            )
            print(f"N={n:,} clean entries, D={d} dirty, repeat={args.repeat}")

            # 1. faithfulness of the bulk path, then memory per clean entry -------------------------
            t = time.perf_counter()
            check = verify_bulk_path(client)
            print(
                f"bulk path faithful on {SAMPLE:,} jobs vs create_dirty_result+mark_result_as_clean: values "
                f"byte-identical, same TYPE/OBJECT ENCODING/MEMORY USAGE/TTL and index scores, same key set "
                f"apart from the lease's own keys {check['lease_keys']} ({check['lease_key_count']:,}) "
                f"[{time.perf_counter() - t:.1f}s]"
            )

            big, base = KeySpace("big"), KeySpace("dirty-only")
            client.config_set("appendonly", "no")
            print("appendonly switched OFF (CONFIG SET appendonly no) for the bulk load only")
            mem_before, clients_before = used_memory(client)
            loader = redis_lib.Redis(port=server.port)
            t = time.perf_counter()
            bulk_load(loader, big, range(n))
            load_s = time.perf_counter() - t
            loader.close()
            loader.connection_pool.disconnect()
            mem_after, clients_after = used_memory(client)
            compact = measure_compact(client, server.port, n) if args.compact else None
            client.config_set("appendonly", "yes")
            aof_s = wait_for_aof(client)
            print(
                f"bulk load {n:,} entries: {load_s:.1f}s ({n / load_s:,.0f}/s); appendonly back ON, "
                f"AOF rewrite finished in {aof_s:.1f}s before any timing"
            )

            delta = mem_after - mem_before
            sample_ids = [job_id(i) for i in rng.sample(range(n), min(SAMPLE, n))]
            pipe = client.pipeline(transaction=False)
            for j in sample_ids:
                pipe.memory_usage(big.result(j), samples=0).strlen(big.result(j))
            got = pipe.execute()
            usages, lengths = got[0::2], got[1::2]
            value_enc = client.object("encoding", big.result(sample_ids[0])).decode()
            index_usage = client.memory_usage(big.index, samples=0)
            index_enc = client.object("encoding", big.index).decode()
            index_members = client.zcard(big.index)
            mean_usage = statistics.fmean(usages)
            rest = delta - mean_usage * n - index_usage
            mstats = client.memory_stats()

            # dirty entries through the real path, in both namespaces (AOF on) --------------------
            big_store = RedisJobResultStore(client, big.namespace)
            base_store = RedisJobResultStore(client, base.namespace)
            for i in range(n, n + d):
                real_write(client, big_store, i, clean=False)
                real_write(client, base_store, i, clean=False)
            dirty_enc = client.object("encoding", big.dirty)
            dirty_enc = dirty_enc.decode() if dirty_enc else "-"

            # 2. get_dirty_results: big namespace vs dirty-only baseline, alternating ---------------
            for _ in range(2):  # warm-up
                big_store.get_dirty_results()
                base_store.get_dirty_results()
            big_t, base_t = [], []
            for _ in range(args.repeat):
                big_t.append(timed(big_store.get_dirty_results))
                base_t.append(timed(base_store.get_dirty_results))
            assert len(big_store.get_dirty_results()) == d == len(base_store.get_dirty_results())

            t = time.perf_counter()
            naive_dirty = naive_seen = 0
            prefix = DIRTY_PREFIX.encode()
            cursor = 0
            while True:
                cursor, batch = client.scan(cursor, match=f"{big.base}:result:*", count=1000)
                if batch:
                    for raw in client.mget(batch):
                        naive_seen += 1
                        naive_dirty += raw is not None and raw.startswith(prefix)
                if cursor == 0:
                    break
            naive_s = time.perf_counter() - t
            assert naive_dirty == d, (naive_dirty, d)

            # 3. skip-path decision read vs PING, alternating; then the two writes -----------------
            picks = [job_id(rng.randrange(n)) for _ in range(SKIP_CALLS)]
            for j in picks[:200]:
                client.ping()
                big_store.get_entry(j)
            ping_t, get_t = [], []
            for j in picks:
                t = time.perf_counter()
                client.ping()
                ping_t.append(time.perf_counter() - t)
                t = time.perf_counter()
                entry = big_store.get_entry(j)
                get_t.append(time.perf_counter() - t)
                assert entry is not None and entry.is_clean
            if compact is not None:
                compact_store = RedisJobResultStore(client, "compact", result_documents=DiscardedDocuments())
                compact["get_t"], compact["ping_t"] = [], []
                for j in picks:
                    t = time.perf_counter()
                    client.ping()
                    compact["ping_t"].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    entry = compact_store.get_entry(j)
                    compact["get_t"].append(time.perf_counter() - t)
                    assert entry is not None and entry.summary and entry.is_clean
            create_t, clean_t = [], []
            for i in range(n + d, n + d + WRITES):
                lease = RedisJobLease(client, big.namespace, job_id(i))
                token = lease.acquire()
                result, _ = make_result(i, token)
                t = time.perf_counter()
                big_store.create_dirty_result(result, fence=token)
                create_t.append(time.perf_counter() - t)
                lease.release()
                t = time.perf_counter()
                big_store.mark_result_as_clean(result.job_id)
                clean_t.append(time.perf_counter() - t)
            client.close()

        # -- report ------------------------------------------------------------------------------
        med = statistics.median
        print()
        print(f"memory at N={n:,} clean entries (INFO used_memory, MEMORY USAGE ... SAMPLES 0)")
        rows = [
            ("entry JSON length (STRLEN)", f"median {med(lengths):.0f} B, min {min(lengths)}, max {max(lengths)}"),
            ("used_memory delta / N", f"{delta / n:.1f} B  (delta {delta / 2**20:.1f} MiB)"),
            ("  of it: client buffers", f"{(clients_after - clients_before) / n:+.2f} B"),
            ("MEMORY USAGE result key", f"mean {mean_usage:.1f} B (min {min(usages)}, max {max(usages)}), {value_enc}"),
            (
                "index zset / N",
                f"{index_usage / n:.1f} B  ({index_enc}, {index_members:,} members of "
                f"{index_usage / index_members:.0f} B, "
                f"{index_usage / 2**20:.1f} MiB, "
                f"{100 * index_usage / delta:.1f}% of the delta)",
            ),
            ("rest / N (keyspace table...)", f"{rest / n:.1f} B"),
            ("MEMORY STATS keys.bytes-per-key", f"{mstats.get('keys.bytes-per-key')} B (all keys incl. index)"),
            (
                "fence counter (lease)",
                f"{check['fence_usage']} B ({check['fence_encoding']}), one per namespace: "
                f"{check['lease_key_count']} key(s) for {SAMPLE:,} jobs",
            ),
            ("dirty set encoding", f"{dirty_enc} at {d} members"),
            (
                "PER FINISHED JOB, in all",
                f"{(delta + check['fence_usage']) / n:.1f} B  (used_memory delta / N + the fence counter's share; "
                f"key {len(big.result(sample_ids[0]))} chars)",
            ),
        ]
        for label, value in rows:
            print(f"  {label:<34} {value}")
        print()
        print(f"{'latency':<52}{'median':>11}{'p99':>11}{'baseline':>11}{'ratio':>8}")
        lines = [
            (f"get_dirty_results, {n:,} clean + {d} dirty", big_t, base_t),
            (f"get_dirty_results, {d} dirty only (baseline)", base_t, None),
            (f"get_entry, clean (skip decision) x{SKIP_CALLS}", get_t, ping_t),
            (f"PING same client (baseline) x{SKIP_CALLS}", ping_t, None),
            (f"create_dirty_result, fenced x{WRITES}", create_t, ping_t),
            (f"mark_result_as_clean x{WRITES}", clean_t, ping_t),
        ]
        for label, values, baseline in lines:
            b = f"{med(baseline) * 1000:.3f}" if baseline else ""
            r = f"{med(values) / med(baseline):.2f}x" if baseline else ""
            print(f"  {label:<50}{med(values) * 1000:>8.3f} ms{pct(values, 0.99) * 1000:>8.3f} ms{b:>11}{r:>8}")
        print(
            f"  {'naive SCAN+MGET listing, once':<50}{ms(naive_s):>11}{'':>11}{med(base_t) * 1000:>11.3f}"
            f"{naive_s / med(base_t):>7.0f}x   ({naive_seen:,} entries read, {naive_dirty} dirty)"
        )
        if compact is not None:
            print()
            print(f"clean references (--compact, [jrs] result_documents) at N={n:,}, same server and run")
            print(
                f"  bulk path faithful on {SAMPLE:,} jobs vs create_dirty_result+mark_result_as_clean with "
                f"documents: byte-identical references, same bucket encoding, MEMORY USAGE and index scores"
            )
            rows = [
                ("reference length (STRLEN)", f"median {med(compact['lengths']):.0f} B, max {max(compact['lengths'])}"),
                ("used_memory delta / N, JSON entry", f"{delta / n:.1f} B"),
                ("used_memory delta / N, reference", f"{compact['delta'] / n:.1f} B  ({compact['delta'] / delta:.0%})"),
                ("PER FINISHED JOB, in all", f"{(compact['delta'] + check['fence_usage']) / n:.1f} B"),
                ("MEMORY USAGE buckets / N", f"{compact['mean_usage']:.1f} B ({compact['encoding']})"),
                ("index zset / N", f"{compact['index_usage'] / n:.1f} B"),
            ]
            for label, value in rows:
                print(f"  {label:<34} {value}")
            get_c, ping_c = compact["get_t"], compact["ping_t"]
            print(
                f"  {'get_entry, reference (skip decision)':<34} {med(get_c) * 1000:.3f} ms (p99 "
                f"{pct(get_c, 0.99) * 1000:.3f}), PING {med(ping_c) * 1000:.3f} ms: {med(get_c) / med(ping_c):.2f}x"
            )
        print(f"\ntotal {time.perf_counter() - started_all:.0f}s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
