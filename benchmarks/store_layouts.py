"""What a clean entry would cost in other layouts: the measured basis of docs/operations/sizing.md.

A study, not the store: the store writes layout ``today`` only. Loads N realistic clean jobs
(``store_bench.make_result``: SUCCEEDED, application id, one output path, small metrics, sha256
fingerprint, times, attempt, fence) into a private redis-server in each layout in turn (FLUSHALL
in between, ``appendonly no``: memory only) and reports ``used_memory`` delta / N, each with the
namespace's index of the ``index_limit`` (10,000) newest creations, as a store that grew by
creates holds it. Then times the skip read of each layout (the read pipelined with the
quarantine EXISTS, one round trip, as ``get_entry`` does) against a PING on the same client.

Layouts (the entry's key stays ``jrs:{ns}:result:<job id>`` where it is a string):

* ``today``      - the schema-2 JSON string ``serde.encode_entry`` writes (~309 B): the baseline.
* ``--members``  - today's JSON with one member removed in turn: what each member costs.
* ``ref``        - the FLINK-2354 split: a ~42 B reference (state, schema version, creation time,
                   fence, the fingerprint's first 132 bits; the status when not SUCCEEDED)
                   that fits Redis's 44-byte ``embstr``; the full document (today's JSON) lives in
                   object storage, keyed by job id and fence.
* ``ref+out``    - the reference plus the outputs (job id templated): the skip's return value
                   stays in Redis, metrics/attempt/times/application id go to the document.
* ``bucket-ref`` - the reference as a field of a per-bucket hash (``jrs:{ns}:r:<crc32 % B>``,
                   ~100 jobs per bucket, listpack encoding): no per-job key at all.

    .venv/bin/python benchmarks/store_layouts.py                # 1,000,000 jobs per layout
    .venv/bin/python benchmarks/store_layouts.py --members      # and today's JSON without each member
    .venv/bin/python benchmarks/store_layouts.py --entries 100000
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import redis as redis_lib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from store_bench import created_ms, job_id, make_result, pct  # noqa: E402

from airflow_jrs.domain.model import EntryState, JobResult  # noqa: E402
from airflow_jrs.store.redis.keys import KeySpace  # noqa: E402
from airflow_jrs.store.redis.results import DEFAULT_INDEX_LIMIT  # noqa: E402
from airflow_jrs.store.results.serde import _templated, compact_fingerprint, encode_entry  # noqa: E402
from jrs_testbench.redis_server import EmbeddedRedis  # noqa: E402

CHUNK = 2_000
READS = 5_000
PER_BUCKET = 100
KEYS = KeySpace("big")
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def b36(n: int) -> str:
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = _B36[r] + out
        if n == 0:
            return out


def reference(result: JobResult, created_us: int) -> str:
    """The proposed clean reference: ``c3;<created us, base36>;<fence, base36>;<fingerprint's first
    22 base64url characters (132 bits)>[;<status>]``. Its first byte is the state (the clean script flips
    ``d`` to ``c`` in place, as it flips today's prefix), its second the schema version."""
    fp = compact_fingerprint(result.fingerprint)[:22]
    status = "" if result.status.is_success else f";{result.status.value[0]}"
    return f"c3;{b36(created_us)};{b36(result.fence or 0)};{fp}{status}"


def jobs(n: int) -> Iterator[tuple[str, JobResult, int, str]]:
    for i in range(n):
        result, created = make_result(i)
        yield result.job_id, result, created_ms(created), encode_entry(result, EntryState.CLEAN, created)


def drop_member(name: str) -> Callable[[str, JobResult, str], str]:
    def value(job: str, result: JobResult, raw: str) -> str:
        doc = json.loads(raw)
        doc.pop(name, None)
        return json.dumps(doc, separators=(",", ":"))

    return value


def ref_value(job: str, result: JobResult, raw: str) -> str:
    return reference(result, json.loads(raw)["c"])


def ref_out_value(job: str, result: JobResult, raw: str) -> str:
    _, outputs = _templated(dict(result.outputs), job)
    return ref_value(job, result, raw) + ";" + json.dumps(outputs, separators=(",", ":"))


def load(client: redis_lib.Redis, n: int, value: Callable[[str, JobResult, str], str], bucketed: bool) -> str:
    """Load ``n`` jobs; return the key that holds job 0 (for OBJECT ENCODING)."""
    buckets = max(1, n // PER_BUCKET)
    pipe = client.pipeline(transaction=False)
    strings: dict[str, str] = {}
    hashes: dict[str, dict[str, str]] = {}
    newest: dict[str, int] = {}
    for i, (job, result, score, raw) in enumerate(jobs(n)):
        v = value(job, result, raw)
        if bucketed:
            hashes.setdefault(f"{KEYS.base}:r:{zlib.crc32(job.encode()) % buckets}", {})[job] = v
        else:
            strings[KEYS.result(job)] = v
        if i >= n - DEFAULT_INDEX_LIMIT:
            newest[job] = score
        if (i + 1) % CHUNK == 0 or i == n - 1:
            if strings:
                pipe.mset(strings)
            for key, fields in hashes.items():
                pipe.hset(key, mapping=fields)
            pipe.execute()
            strings, hashes = {}, {}
    pipe.zadd(KEYS.index, newest).execute()
    job0 = job_id(0)
    return f"{KEYS.base}:r:{zlib.crc32(job0.encode()) % buckets}" if bucketed else KEYS.result(job0)


def used(client: redis_lib.Redis) -> int:
    time.sleep(1.0)  # incremental rehashing
    return int(client.info("memory")["used_memory"])


def sampled(
    client: redis_lib.Redis, n: int, value: Callable[[str, JobResult, str], str], bucketed: bool, rng: random.Random
) -> tuple[float, float]:
    """Median value length and mean ``MEMORY USAGE`` per job over 200 random jobs (a bucket's
    usage divided by the jobs it holds)."""
    picks = [rng.randrange(n) for _ in range(200)]
    lengths, usages = [], []
    buckets = max(1, n // PER_BUCKET)
    for i in picks:
        result, created = make_result(i)
        lengths.append(len(value(result.job_id, result, encode_entry(result, EntryState.CLEAN, created))))
        if bucketed:
            key = f"{KEYS.base}:r:{zlib.crc32(result.job_id.encode()) % buckets}"
            usages.append(client.memory_usage(key, samples=0) / client.hlen(key))
        else:
            usages.append(client.memory_usage(KEYS.result(result.job_id), samples=0))
    return statistics.median(lengths), statistics.fmean(usages)


def skip_reads(client: redis_lib.Redis, n: int, bucketed: bool, rng: random.Random) -> tuple[list[float], list[float]]:
    buckets = max(1, n // PER_BUCKET)
    reads, pings = [], []
    for k in range(READS + 200):
        job = job_id(rng.randrange(n))
        t = time.perf_counter()
        client.ping()
        p = time.perf_counter() - t
        t = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        if bucketed:
            pipe.hget(f"{KEYS.base}:r:{zlib.crc32(job.encode()) % buckets}", job)
        else:
            pipe.get(KEYS.result(job))
        pipe.exists(KEYS.quarantine(job))
        raw, _ = pipe.execute()
        took = time.perf_counter() - t
        assert raw is not None
        if k >= 200:
            reads.append(took)
            pings.append(p)
    return reads, pings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000, help="jobs per layout (default 1,000,000)")
    parser.add_argument("--members", action="store_true", help="also today's JSON without each member in turn")
    args = parser.parse_args()
    n = args.entries
    rng = random.Random(20261124)
    sample_job, sample_result, _, sample_raw = next(jobs(1))
    layouts: list[tuple[str, Callable[[str, JobResult, str], str], bool]] = [
        ("today (schema 2 JSON string)", lambda j, r, raw: raw, False),
        ("ref (reference string)", ref_value, False),
        ("ref+out (reference + outputs)", ref_out_value, False),
        ("bucket-ref (hash field)", ref_value, True),
    ]
    if args.members:
        for name in ("at", "O", "F", "a", "m", "b0", "c"):
            layouts.insert(1, (f"today without '{name}'", drop_member(name), False))
    work = Path(tempfile.mkdtemp(prefix="jrs-store-layouts-"))
    try:
        with EmbeddedRedis(work / "redis", appendfsync="everysec") as server:
            client = redis_lib.Redis(port=server.port)
            client.config_set("appendonly", "no")
            cfg = client.config_get("hash-max-*")
            print(f"redis-server {client.info('server')['redis_version']}, N={n:,} jobs per layout, appendonly no, "
                  f"index of the {DEFAULT_INDEX_LIMIT:,} newest, {cfg}")  # fmt: skip
            print(f"sample entry today ({len(sample_raw)} B): {sample_raw}")
            print(f"sample reference ({len(ref_value(sample_job, sample_result, sample_raw))} B): "
                  f"{ref_value(sample_job, sample_result, sample_raw)}")  # fmt: skip
            header = f"{'layout':<34}{'value B':>8}{'MEM USAGE/job':>14}{'encoding':>10}{'used/N B':>10}"
            print(f"\n{header}{'read ms':>9}{'p99':>8}{'PING ms':>9}{'ratio':>7}")
            for name, value, bucketed in layouts:
                client.flushall()
                before = used(client)
                t = time.perf_counter()
                key = load(client, n, value, bucketed)
                load_s = time.perf_counter() - t
                delta = used(client) - before
                vlen, usage = sampled(client, n, value, bucketed, rng)
                enc = client.object("encoding", key).decode()
                row = f"{name:<34}{vlen:>8.0f}{usage:>14.1f}{enc:>10}{delta / n:>10.1f}"
                if name.startswith("today without"):
                    print(row, flush=True)
                    continue
                reads, pings = skip_reads(client, n, bucketed, rng)
                med = statistics.median
                print(f"{row}{med(reads) * 1e3:>9.3f}{pct(reads, 0.99) * 1e3:>8.3f}{med(pings) * 1e3:>9.3f}"
                      f"{med(reads) / med(pings):>6.2f}x   [load {load_s:.0f}s]", flush=True)  # fmt: skip
            client.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
