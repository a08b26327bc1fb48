"""``doctor``: does this machine and this Redis keep airflow-jrs's promises?

The store's guarantees rest on things it cannot enforce from inside: fencing needs every
acknowledged write on disk (``appendonly yes``, ``appendfsync always``), results must never be
evicted (``maxmemory-policy noeviction``), Spark needs a matching Java, and the PySpark a
driver imports must match the jars it runs on. Each check says ok, warn or fail and what to
change; any warn or fail makes the exit code non-zero, so a deployment script can gate on it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from airflow_jrs.cli.common import NOT_FOUND, OK, UNREACHABLE, USAGE, Ctx, Output, open_store, store_failure
from airflow_jrs.exceptions import JrsConfigError, StoreUnavailableError
from airflow_jrs.settings import durability_parts

#: Above this median PING the store costs every task noticeably (a remote region, a saturated server).
SLOW_PING_MS = 50.0


@dataclass(frozen=True)
class Check:
    name: str
    level: str  # ok | warn | fail
    detail: str


def _redis_checks(ctx: Ctx) -> list[Check]:
    store = ctx.store
    took = store.ping()
    checks = [Check("connection", "ok", f"PONG in {took * 1000:.1f} ms from {ctx.where()}")]
    facts = ctx.jobs.server_facts()
    version = facts.version or "unknown"
    major = int(version.split(".")[0]) if version[:1].isdigit() else 0
    checks.append(
        Check(
            "redis version", "ok" if major >= 6 else "warn", f"Redis {version}" + ("" if major >= 6 else "; use 6.2+")
        )
    )
    durable = facts.fencing_durable
    persistence = f"appendonly {facts.appendonly or '?'}, appendfsync {facts.appendfsync or '?'}"
    if durable:
        checks.append(Check("persistence", "ok", f"{persistence}: an acknowledged fence survives a crash"))
    elif durable is None:
        checks.append(
            Check(
                "persistence",
                "warn",
                f"{persistence}: could not read the settings (CONFIG GET refused); make sure the server "
                "runs with appendonly yes and appendfsync always, or fencing may not hold after a crash",
            )
        )
    else:
        checks.append(
            Check(
                "persistence",
                "warn",
                f"{persistence}: the fencing guarantee does not hold; a crash can lose the last acknowledged "
                "fence and hand a live holder's token to another attempt. Set appendonly yes and appendfsync always",
            )
        )
    policy = facts.maxmemory_policy
    if policy == "noeviction":
        checks.append(Check("eviction", "ok", "maxmemory-policy noeviction: results are never evicted"))
    else:
        checks.append(
            Check(
                "eviction",
                "warn",
                f"maxmemory-policy {policy or 'unknown'}: Redis may evict results, and an evicted result runs its "
                "job again. Set maxmemory-policy noeviction",
            )
        )
    median = ctx.jobs.ping_latency() * 1000
    level = "ok" if median <= SLOW_PING_MS else "warn"
    checks.append(Check("latency", level, f"median PING {median:.1f} ms over 5"))
    failover = _failover_check(ctx)
    if failover is not None:
        checks.append(failover)
    return checks


def _failover_check(ctx: Ctx) -> Check | None:
    """Behind Sentinel: which primary the sentinels name, its replicas, and whether a failover
    keeps what the store acknowledged (``durability`` waits for a replica) and stops a holder
    cut off with the old primary (``min-replicas-to-write``). ``None``: not Sentinel-managed."""
    facts = ctx.jobs.failover_facts()
    if facts is None:
        return None
    (host, port), replicas = facts.primary, facts.replicas
    durability = ctx.jobs.settings.durability
    at_least, max_lag = facts.min_replicas_to_write, facts.min_replicas_max_lag
    said = f"the sentinels name primary {host}:{port} with {len(replicas)} healthy replica(s)"
    said += f"; durability {durability}"
    said += f", min-replicas-to-write {at_least if at_least is not None else '?'}"
    said += f", min-replicas-max-lag {max_lag if max_lag is not None else '?'} s"
    wants, _ = durability_parts(durability)
    if not replicas:
        return Check("failover", "warn", f"{said}: no replica can take over; a lost primary stops every task")
    if wants != "replicas":
        return Check(
            "failover",
            "warn",
            f"{said}: a failover can lose the last acknowledged writes (a committed result, a fence) and "
            "start a job twice. Set durability to 'replicas:1' (docs/operations/redis.md)",
        )
    if not at_least:
        return Check(
            "failover",
            "warn",
            f"{said}: a holder cut off with the old primary keeps renewing its lease there. Set min-replicas-to-write "
            "1 and min-replicas-max-lag below lease_ttl on the servers (docs/operations/redis.md)",
        )
    return Check("failover", "ok", f"{said}: an acknowledged write reaches a replica before it is acted on")


def _run(cmd: list[str], timeout: float = 120) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout + done.stderr


def _java() -> tuple[Check, int | None]:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    if java is None:
        return Check("java", "fail", "no java on PATH or JAVA_HOME: spark-submit cannot start"), None
    text = _run([java, "-version"], timeout=60) or ""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not found:
        return Check("java", "warn", f"{java} did not tell its version"), None
    major = int(found.group(1)) if found.group(1) != "1" else int(found.group(2) or 0)
    return Check("java", "ok", f"Java {major} ({java})"), major


def _pyspark_files() -> tuple[Path | None, str | None, str | None]:
    """The pyspark package this interpreter imports: its folder, the version its own files say
    (``pyspark/version.py``) and the Spark version of its jars. Files, not distribution metadata:
    pyspark-client shares the package's files, and ./dev installs pyspark's over them on purpose,
    so the metadata of either distribution may not describe what runs."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None, None, None
    folder = Path(next(iter(spec.submodule_search_locations)))
    try:
        text = (folder / "version.py").read_text(encoding="utf-8")
    except OSError:
        text = ""
    found = re.search(r"""__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""", text)
    core = sorted((folder / "jars").glob("spark-core_*.jar"))
    jars = re.search(r"spark-core_[\d.]+-(.+)\.jar$", core[0].name) if core else None
    return folder, found.group(1) if found else None, jars.group(1) if jars else None


def spark_submit_path(binary: str = "spark-submit") -> tuple[str | None, bool]:
    """Where the Spark hook's ``spark-submit`` comes from, and whether it is on this PATH.

    The hook runs the bare name (its connection's ``spark-binary``), so the worker's ``PATH``
    decides. A shell that calls ``.venv/bin/airflow-jrs`` may not have the venv on ``PATH``,
    while the Airflow it checks does (``scripts/airflow_local.py`` and ``./dev`` put it there):
    then this interpreter's pyspark's ``bin/spark-submit`` is checked, which finds its Spark
    from its own folder (the venv's ``bin/spark-submit`` would ask ``python3`` on ``PATH``).
    """
    on_path = shutil.which(binary)
    if on_path:
        return on_path, True
    folder, _, _ = _pyspark_files()
    candidate = folder / "bin" / binary if folder else None
    if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate), False
    return None, False


def _spark(java_major: int | None) -> list[Check]:
    checks: list[Check] = []
    folder, pyspark, jars_version = _pyspark_files()
    submit, on_path = spark_submit_path()
    submit_version = None
    if submit:
        found = re.search(r"version (\d+\.\d+\.\d+\S*)", _run([submit, "--version"]) or "")
        submit_version = found.group(1) if found else None
        where = "" if on_path else (
            " (pyspark's own; none on this shell's PATH: the Spark hook runs spark-submit from the worker's "
            "PATH, so start Airflow with the venv's bin/ on PATH, as scripts/airflow_local.py does)"
        )  # fmt: skip
        checks.append(
            Check("spark-submit", "ok" if submit_version else "warn", f"{submit}: Spark {submit_version or '?'}{where}")
        )
    else:
        checks.append(
            Check(
                "spark-submit",
                "warn",
                "no spark-submit on PATH nor beside this Python: install pyspark (or Spark) where Airflow's "
                "workers run and put its bin/ on their PATH",
            )
        )
    spark = submit_version or pyspark
    if folder is None:
        checks.append(Check("pyspark", "ok", "pyspark not installed here (only PySpark applications import it)"))
    else:
        problems = []
        if pyspark is None:
            problems.append(f"{folder / 'version.py'} names no version")
        if jars_version and pyspark and jars_version != pyspark:
            problems.append(f"its jars are Spark {jars_version} (another distribution's files replaced pyspark's)")
        if submit_version and pyspark and submit_version.split("-")[0] != pyspark:
            problems.append(f"spark-submit runs Spark {submit_version}")
        detail = f"pyspark {pyspark or '?'}" + (f" (jars {jars_version})" if jars_version else "") + f" in {folder}"
        if problems:
            checks.append(Check("pyspark", "warn", f"{detail} but {'; '.join(problems)}: install matching versions"))
        else:
            checks.append(Check("pyspark", "ok", detail))
    if java_major is not None and spark and spark.split(".")[0].isdigit() and int(spark.split(".")[0]) >= 4:
        if java_major < 17:
            checks.append(Check("java for spark", "fail", f"Spark {spark} needs Java 17 or newer, found {java_major}"))
    return checks


def _provider() -> Check:
    try:
        from airflow.providers_manager import ProvidersManager

        providers = ProvidersManager().providers
    except Exception as exc:
        return Check("provider", "fail", f"Airflow's ProvidersManager failed: {type(exc).__name__}: {exc}")
    if "airflow-jrs" in providers:
        return Check("provider", "ok", f"airflow-jrs {providers['airflow-jrs'].version} is a registered provider")
    return Check("provider", "fail", "Airflow does not see the airflow-jrs provider: install it where Airflow runs")


def run_doctor(args: object, out: Output) -> int:
    checks: list[Check] = []
    code = OK
    ctx: Ctx | None = None
    try:
        ctx = open_store(args, out)  # type: ignore[arg-type]
        checks += _redis_checks(ctx)
    except StoreUnavailableError as exc:
        checks.append(Check("connection", "fail", store_failure(exc, args)))  # type: ignore[arg-type]
        code = UNREACHABLE
    except JrsConfigError as exc:
        checks.append(Check("configuration", "fail", str(exc)))
        code = USAGE
    if not getattr(args, "redis_only", False):
        java, major = _java()
        checks += [java, *_spark(major), _provider()]
    if code == OK and any(c.level != "ok" for c in checks):
        code = NOT_FOUND
    where = {"namespace": ctx.namespace, "server": ctx.server} if ctx else {}
    if out.as_json:
        out.json({**where, "ok": code == OK, "checks": [vars(c) for c in checks]})
    else:
        if ctx is not None:
            out.header(ctx, "Doctor")
        marks = {"ok": "[green]ok[/green]", "warn": "[yellow]WARN[/yellow]", "fail": "[red]FAIL[/red]"}
        from rich.markup import escape
        from rich.table import Table

        table = Table()
        for column in ("check", "", "detail"):
            table.add_column(column, overflow="fold")
        for c in checks:
            table.add_row(c.name, marks[c.level], escape(c.detail))
        out.console.print(table)
        out.line("all checks passed" if code == OK else "problems found: see WARN and FAIL above")
    return code
