"""``doctor``: does this machine and this Redis keep airflow-jrs's promises?

The store's guarantees rest on things it cannot enforce from inside: fencing needs every
acknowledged write on disk (``appendonly yes``, ``appendfsync always``), results must never be
evicted (``maxmemory-policy noeviction``), Spark needs a matching Java, and the PySpark a
driver imports must match the jars it runs on. Each check says ok, warn or fail and what to
change; any warn or fail makes the exit code non-zero, so a deployment script can gate on it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from airflow_jrs.cli.common import NOT_FOUND, OK, UNREACHABLE, USAGE, Ctx, Output, open_store, store_failure
from airflow_jrs.exceptions import JrsConfigError, StoreUnavailableError
from airflow_jrs.store.server import ping_latency, read_server_facts

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
    facts = read_server_facts(store.client, ctx.namespace)
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
    median = ping_latency(store.client, ctx.namespace) * 1000
    level = "ok" if median <= SLOW_PING_MS else "warn"
    checks.append(Check("latency", level, f"median PING {median:.1f} ms over 5"))
    return checks


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


def _spark(java_major: int | None) -> list[Check]:
    checks: list[Check] = []
    try:
        pyspark = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        pyspark = None
    spec = importlib.util.find_spec("pyspark") if pyspark else None
    jars_version = None
    if spec and spec.submodule_search_locations:
        jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
        core = sorted(jars.glob("spark-core_*.jar"))
        match = re.search(r"spark-core_[\d.]+-(.+)\.jar$", core[0].name) if core else None
        jars_version = match.group(1) if match else None
    home = os.environ.get("SPARK_HOME")
    submit = str(Path(home) / "bin" / "spark-submit") if home else shutil.which("spark-submit")
    submit_version = None
    if submit and Path(submit).exists():
        found = re.search(r"version (\d+\.\d+\.\d+\S*)", _run([submit, "--version"]) or "")
        submit_version = found.group(1) if found else None
        checks.append(
            Check("spark-submit", "ok" if submit_version else "warn", f"{submit}: Spark {submit_version or '?'}")
        )
    else:
        checks.append(
            Check(
                "spark-submit",
                "warn",
                "no spark-submit on PATH or SPARK_HOME: tasks need the Spark connection's binary",
            )
        )
    spark = submit_version or pyspark
    if pyspark is None:
        checks.append(Check("pyspark", "ok", "pyspark not installed here (only PySpark applications import it)"))
    else:
        problems = []
        if jars_version and jars_version != pyspark:
            problems.append(f"its jars are Spark {jars_version}")
        if submit_version and submit_version.split("-")[0] != pyspark:
            problems.append(f"spark-submit runs Spark {submit_version}")
        try:
            client = importlib.metadata.version("pyspark-client")
        except importlib.metadata.PackageNotFoundError:
            client = None
        if client and client != pyspark:
            problems.append(f"pyspark-client {client} is installed too and shares the pyspark package's files")
        detail = f"pyspark {pyspark}" + (f" (jars {jars_version})" if jars_version else "")
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
