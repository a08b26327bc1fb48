"""Store throughput under many workers: skip decisions and lease cycles per second, with server CPU.

Each cell runs C concurrent clients (C = 8, 32, 128) against one target for a fixed time, in
a closed loop (each client sends its next request when the previous reply came back, like an
Airflow worker does), and reports operations per second, p50/p99 latency of each call, and the
server's CPU per operation (``INFO cpu`` ``used_cpu_sys`` + ``used_cpu_user`` before and after,
summed over the primaries; the replicas' CPU is shown apart). Three workloads, in rotation so
machine noise hits all of them:

* ``ping``  - ``PING``: the harness's own ceiling, the baseline of the same run.
* ``skip``  - ``RedisJobResultStore.get_entry`` of a random clean entry among ``--entries``
  loaded ones: the one-round-trip read the operator's skip decision does (GET + EXISTS
  pipelined, then decode), asserted clean.
* ``lease`` - ``RedisJobLease(...).acquire()`` then ``.release()`` on a job of its own (workers
  take different jobs): two Lua scripts, a fenced INCR of the namespace's one counter.
* ``beat``  - ``Heartbeats.beat`` of a running submission (``--workloads ping,beat``): what each
  running Spark job's supervisor sends every second (supervisor.REQUEST_POLL), a fenced write.

Targets: ``single`` (one redis-server, ``appendfsync always`` as docs/operations/redis.md asks),
``single-everysec`` (the same with ``appendfsync everysec``: what an fsync per write costs) and
``cluster`` (jrs_testbench.redis_cluster: 3 primaries + 3 replicas, ``appendfsync always``)
with every client in ONE namespace (one hash slot, so one primary takes all of it), and
``cluster-3ns``: the same cluster, clients spread over three namespaces whose slots live on
three different primaries (the way to split load).

Clients are threads inside ``--procs`` worker processes (default 4), each thread with its own
connection (its own client object). Why: the machine has few cores; 128 processes would
measure the kernel's scheduler, and one process would measure the GIL. The server sees exactly
C connections with a request in flight each, which is what C workers look like to it; the
throughput is bounded by the client side on a small machine, so the figure to extrapolate from
is the server's CPU per operation, not the ops/s.

    .venv/bin/python benchmarks/store_throughput.py                       # 3 reps x 3 s per cell
    .venv/bin/python benchmarks/store_throughput.py --quick               # 1 rep x 1 s, single only
"""

from __future__ import annotations

import argparse
import array
import multiprocessing as mp
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis as redis_lib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # jrs_testbench lives beside benchmarks/, not installed
sys.path.insert(0, str(ROOT / "benchmarks"))

from store_bench import bulk_load, job_id, pct  # noqa: E402

from airflow_jrs.store.redis.heartbeats import RedisHeartbeats  # noqa: E402
from airflow_jrs.store.redis.keys import KeySpace  # noqa: E402
from airflow_jrs.store.redis.leases import RedisJobLease  # noqa: E402
from airflow_jrs.store.redis.results import RedisJobResultStore  # noqa: E402
from jrs_testbench.redis_cluster import EmbeddedRedisCluster  # noqa: E402
from jrs_testbench.redis_server import EmbeddedRedis  # noqa: E402

WORKLOADS = ("ping", "skip", "lease", "beat")
WARMUP = 20  # calls per client before the clock starts (connections, script cache)


@dataclass
class Target:
    """Where the clients go: a port, cluster or not, the namespaces, and the nodes to ask for CPU."""

    name: str
    port: int
    cluster: bool
    namespaces: list[str]
    primaries: list[int]  # ports
    replicas: list[int] = field(default_factory=list)

    def client(self) -> Any:
        if self.cluster:
            return redis_lib.RedisCluster(host="127.0.0.1", port=self.port)
        return redis_lib.Redis(port=self.port)


def cpu_seconds(ports: list[int]) -> list[float]:
    out = []
    for port in ports:
        c = redis_lib.Redis(port=port)
        info = c.info("cpu")
        out.append(float(info["used_cpu_sys"]) + float(info["used_cpu_user"]))
        c.close()
    return out


def commands(ports: list[int]) -> int:
    total = 0
    for port in ports:
        c = redis_lib.Redis(port=port)
        total += int(c.info("stats")["total_commands_processed"])
        c.close()
    return total


# -- the clients ------------------------------------------------------------------------------
def client_loop(target: Target, workload: str, client_no: int, entries: int, seconds: float,
                barrier: Any, out: list[Any]) -> None:  # fmt: skip
    """One client: its own connection, WARMUP calls, the barrier, then calls for ``seconds``."""
    namespace = target.namespaces[client_no % len(target.namespaces)]
    client = target.client()
    store = RedisJobResultStore(client, namespace)
    rng = random.Random(client_no)
    serial = 0
    if workload == "beat":  # a running submission's supervisor: its lease, its first beat
        beat_job = f"beat-bench.{os.getpid()}.c{client_no}"  # a job of its own in every cell
        beat_fence = RedisJobLease(client, namespace, beat_job, ttl=600).acquire()
        beats = RedisHeartbeats(client, namespace)
        beats.beat(beat_job, beat_fence, 600_000, host="bench", pid=os.getpid(), child=0, first=True)

    def call() -> tuple[float, float]:
        nonlocal serial
        if workload == "ping":
            t = time.perf_counter()
            client.ping()
            return time.perf_counter() - t, 0.0
        if workload == "skip":
            j = job_id(rng.randrange(entries))
            t = time.perf_counter()
            entry = store.get_entry(j)
            took = time.perf_counter() - t
            assert entry is not None and entry.is_clean, j
            return took, 0.0
        if workload == "beat":
            t = time.perf_counter()
            beats.beat(beat_job, beat_fence, 600_000, host="bench", pid=os.getpid(), child=1)
            return time.perf_counter() - t, 0.0
        serial += 1
        lease = RedisJobLease(client, namespace, f"lease-bench.c{client_no}.{serial}")
        t = time.perf_counter()
        lease.acquire()
        t1 = time.perf_counter()
        assert lease.release()
        return t1 - t, time.perf_counter() - t1

    try:
        for _ in range(WARMUP):
            call()
    except BaseException:
        barrier.abort()  # the others, and the parent, stop waiting: the run fails loudly
        raise
    first, second = array.array("d"), array.array("d")
    barrier.wait()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a, b = call()
        first.append(a)
        second.append(b)
    client.close()
    out.append((first, second))


def process_main(target: Target, workload: str, first_client: int, threads: int, entries: int,
                 seconds: float, barrier: Any, queue: Any) -> None:  # fmt: skip
    out: list[Any] = []
    workers = [
        threading.Thread(target=client_loop, args=(target, workload, first_client + i, entries, seconds, barrier, out))
        for i in range(threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    first = array.array("d")
    second = array.array("d")
    for a, b in out:
        first.extend(a)
        second.extend(b)
    queue.put((first.tobytes(), second.tobytes(), len(out)))


@dataclass
class Cell:
    target: str
    workload: str
    clients: int
    ops_per_s: float
    p50: float
    p99: float
    p50_b: float  # release, for leases
    p99_b: float
    cpu_us_per_op: float  # primaries, summed
    hottest_share: float  # of the primaries' CPU, on the busiest primary
    replica_us_per_op: float
    commands_per_op: float


def run_cell(target: Target, workload: str, clients: int, procs: int, entries: int, seconds: float) -> Cell:
    ctx = mp.get_context("fork")
    procs = min(procs, clients)
    barrier = ctx.Barrier(clients + 1)
    queue = ctx.Queue()
    per = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    starts = [sum(per[:i]) for i in range(procs)]
    children = [
        ctx.Process(target=process_main, args=(target, workload, starts[i], per[i], entries, seconds, barrier, queue))
        for i in range(procs)
    ]
    for p in children:
        p.start()
    barrier.wait(timeout=300)
    cpu0, rcpu0, cmd0 = cpu_seconds(target.primaries), cpu_seconds(target.replicas), commands(target.primaries)
    results = [queue.get(timeout=seconds + 300) for _ in children]
    cpu1, rcpu1, cmd1 = cpu_seconds(target.primaries), cpu_seconds(target.replicas), commands(target.primaries)
    for p in children:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a client process failed (exit code {p.exitcode}); see its traceback above")
    first, second = array.array("d"), array.array("d")
    for a, b, _threads in results:
        first.frombytes(a)
        second.frombytes(b)
    ops = len(first)
    deltas = [b - a for a, b in zip(cpu0, cpu1, strict=True)]
    used = sum(deltas)
    rused = sum(b - a for a, b in zip(rcpu0, rcpu1, strict=True))
    lat_b = list(second) if workload == "lease" else [0.0]
    return Cell(
        target=target.name,
        workload=workload,
        clients=clients,
        ops_per_s=ops / seconds,
        p50=statistics.median(first),
        p99=pct(list(first), 0.99),
        p50_b=statistics.median(lat_b),
        p99_b=pct(lat_b, 0.99),
        cpu_us_per_op=used / ops * 1e6,
        hottest_share=max(deltas) / used if used > 0 else 0.0,
        replica_us_per_op=rused / ops * 1e6,
        # INFO calls of this harness are counted too: a handful per cell, noise at these counts
        commands_per_op=(cmd1 - cmd0) / ops,
    )


# -- targets ----------------------------------------------------------------------------------
def spread_namespaces(client: redis_lib.RedisCluster, count: int) -> list[str]:
    """``count`` namespaces whose hash slots are served by ``count`` different primaries."""
    found: dict[int, str] = {}
    for i in range(10_000):
        ns = f"bench-{i}"
        node = client.get_node_from_key(KeySpace(ns).fence_counter)
        found.setdefault(node.port, ns)
        if len(found) == count:
            return list(found.values())
    raise RuntimeError(f"found only {len(found)} primaries for {count} namespaces")


def load(target: Target, entries: int) -> None:
    """Clean entries as CREATE + CLEAN leave them (store_bench's bulk path, checked there against the
    real path), through a plain client to the primary of each namespace's slot (a cluster client
    refuses a pipelined MSET)."""
    for ns in target.namespaces:
        port = target.port
        if target.cluster:
            probe = target.client()
            port = probe.get_node_from_key(KeySpace(ns).fence_counter).port
            probe.close()
        client = redis_lib.Redis(port=port)
        bulk_load(client, KeySpace(ns), range(entries))
        client.close()


def summarize(cells: list[Cell]) -> None:
    med = statistics.median
    print(
        f"\n{'target':<16}{'workload':<8}{'clients':>8}{'ops/s':>10}{'spread':>16}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'2nd p50':>9}{'2nd p99':>9}{'srv us/op':>10}{'hot %':>7}{'repl us':>9}{'cmd/op':>8}"
    )
    keys = sorted({(c.target, c.clients, c.workload) for c in cells}, key=lambda k: (k[0], k[1], WORKLOADS.index(k[2])))
    for t, n, w in keys:
        cs = [c for c in cells if (c.target, c.clients, c.workload) == (t, n, w)]
        ops = [c.ops_per_s for c in cs]
        second = f"{med([c.p50_b for c in cs]) * 1e3:>9.3f}{med([c.p99_b for c in cs]) * 1e3:>9.3f}"
        print(
            f"{t:<16}{w:<8}{n:>8}{med(ops):>10,.0f}{f'{min(ops):,.0f}-{max(ops):,.0f}':>16}"
            f"{med([c.p50 for c in cs]) * 1e3:>9.3f}{med([c.p99 for c in cs]) * 1e3:>9.3f}"
            f"{second if w == 'lease' else '':>18}{med([c.cpu_us_per_op for c in cs]):>10.1f}"
            f"{med([c.hottest_share for c in cs]) * 100:>7.0f}{med([c.replica_us_per_op for c in cs]):>9.1f}"
            f"{med([c.commands_per_op for c in cs]):>8.2f}"
        )
    print(
        "\nops/s: median over reps (spread min-max); lease ops = acquire+release cycles, its p50/p99 are "
        "acquire's and '2nd' release's; srv us/op: primaries' CPU (INFO cpu, sys+user) per op; hot %: the "
        "busiest primary's share of it; repl us: replicas' CPU per op;\n"
        "cmd/op: commands the primaries processed (those a Lua script calls included)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="8,32,128", help="concurrency levels (default 8,32,128)")
    parser.add_argument(
        "--targets", default="single,single-everysec,cluster,cluster-3ns", help="which targets (default all four)"
    )
    parser.add_argument("--workloads", default="ping,skip,lease", help=f"some of {','.join(WORKLOADS)}")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per cell (default 3)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of every cell, interleaved (default 3)")
    parser.add_argument("--procs", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--entries", type=int, default=100_000, help="clean entries per namespace (default 100,000)")
    parser.add_argument("--quick", action="store_true", help="1 rep x 1 s, single target, 10,000 entries")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.seconds, args.targets, args.entries = 1, 1.0, "single", 10_000
    levels = [int(x) for x in args.clients.split(",")]
    workloads = args.workloads.split(",")
    if not set(workloads) <= set(WORKLOADS):
        parser.error(f"--workloads takes some of {','.join(WORKLOADS)}, got {args.workloads!r}")
    wanted = args.targets.split(",")
    work = Path(tempfile.mkdtemp(prefix="jrs-throughput-"))
    cells: list[Cell] = []
    started = time.perf_counter()
    print(
        f"redis-py {redis_lib.__version__}, Python {platform.python_version()}, {platform.machine()} "
        f"x{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; clients {levels} as threads in "
        f"{args.procs} processes, {args.seconds}s per cell, {args.reps} reps, {args.entries:,} clean entries"
    )
    try:
        targets: list[Target] = []
        servers: list[Any] = []
        if "single" in wanted:
            single = EmbeddedRedis(work / "single").start()  # appendfsync always
            servers.append(single)
            targets.append(Target("single", single.port, False, ["bench"], [single.port]))
        if "single-everysec" in wanted:
            lax = EmbeddedRedis(work / "single-everysec", appendfsync="everysec").start()
            servers.append(lax)
            targets.append(Target("single-everysec", lax.port, False, ["bench"], [lax.port]))
        if "cluster" in wanted or "cluster-3ns" in wanted:
            cluster = EmbeddedRedisCluster(work / "cluster").start()
            servers.append(cluster)
            probe = cluster.client()
            prim = [n.port for n in probe.get_primaries()]
            repl = [n.port for n in probe.get_replicas()]
            if "cluster" in wanted:
                targets.append(Target("cluster", cluster.nodes[0].port, True, ["bench"], prim, repl))
            if "cluster-3ns" in wanted:
                targets.append(Target("cluster-3ns", cluster.nodes[0].port, True, spread_namespaces(probe, 3),
                                      prim, repl))  # fmt: skip
            probe.close()
        version = redis_lib.Redis(port=targets[0].primaries[0]).info("server")["redis_version"]
        print(f"redis-server {version}, appendonly yes; targets {[t.name for t in targets]}")
        loaded: set[tuple[int, str]] = set()  # the two cluster targets share a cluster
        for t in targets:
            fresh = [ns for ns in t.namespaces if (t.port, ns) not in loaded]
            if fresh:
                load(Target(t.name, t.port, t.cluster, fresh, t.primaries), args.entries)
            loaded.update((t.port, ns) for ns in t.namespaces)
        print(f"loaded in {time.perf_counter() - started:.0f}s")
        for rep in range(args.reps):
            for t in targets:
                for n in levels:
                    for w in workloads:
                        cell = run_cell(t, w, n, args.procs, args.entries, args.seconds)
                        cells.append(cell)
                        print(
                            f"rep {rep + 1} {t.name:<16}{w:<6}{n:>4} clients: {cell.ops_per_s:>9,.0f} ops/s, p50 "
                            f"{cell.p50 * 1e3:.3f} ms, p99 {cell.p99 * 1e3:.3f} ms, server {cell.cpu_us_per_op:.1f} "
                            f"us/op",
                            flush=True,
                        )
        summarize(cells)
        print(f"\ntotal {time.perf_counter() - started:.0f}s")
    finally:
        for s in locals().get("servers", []):
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
