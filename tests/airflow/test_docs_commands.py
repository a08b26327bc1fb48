"""The ``airflow-jrs`` commands of the how-tos and the README run as written.

Every fenced shell block (```bash, ```console, ```sh, ```shell) of ``docs/how-to/*.md`` and
``README.md`` is read; each line that runs ``airflow-jrs`` (continuation lines joined, the
trailing comment dropped, a ``$`` prompt removed) is run, in the page's order, by the installed
console script from the repository root, against a demo store: a private real redis-server whose
namespaces are seeded with the flights DAG's results, named by the ``jrs_default`` connection as
in an Airflow deployment. A destructive verb without ``--yes`` gets a terminal that answers yes,
as the person reading the page would. Each command must exit as documented: 0, unless its
comment says ``exit N``.

Left out, each for a reason the report names: commands that need a running Airflow
(``recompute`` clears task instances through its REST API; the browser and e2e tests run it;
``backfill --missing-only`` without ``--dry-run`` creates backfills through it:
tests/airflow/test_backfill_missing_only.py runs it).

On the pages of :data:`EVERY_COMMAND_PAGES` every command is accounted for, not only
``airflow-jrs``: ``scripts/airflow_local.py`` lines are parsed by the script's own parser (they
start a whole Airflow), the ``airflow backfill create`` line is run as written against a freshly
migrated metadata DB, twice, and the second time must fail with the very lines the page shows;
``./dev`` and ``export`` lines are left out (:data:`LEFT_OUT` says why). A command of another
kind on those pages fails :func:`test_every_command_of_these_pages_is_run_or_checked`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from jrs_testbench.redis_server import EmbeddedRedis

pytestmark = pytest.mark.airflow  # plan and forget --dag-id parse the DAG file with Airflow's DagBag

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "airflow-jrs")
PAGES = [*sorted((ROOT / "docs" / "how-to").glob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^```(?:bash|console|sh|shell)\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: Verbs that need a running Airflow (its REST API), not only the store.
NEEDS_AIRFLOW = {"recompute"}
#: Verbs that change the store and ask first.
ASKS = {"forget", "mark-clean", "purge", "release-quarantine", "recompute"}
#: Placeholders the pages use, and the seeded job that stands for them.
PLACEHOLDERS = {"JOB_ID": "flights_daily.ingest.submit.2013-01-05"}
CONN_NAMESPACE = "docs-demo"
#: Pages whose every shell command (not only ``airflow-jrs``) a test runs or checks.
EVERY_COMMAND_PAGES = [ROOT / "docs" / "how-to" / "backfill.md", ROOT / "docs" / "how-to" / "local-airflow.md"]
#: Commands of those pages no test runs, and why.
LEFT_OUT = {
    "dev": "./dev setup installs system packages as root; tests/unit/test_dev_script.py tests ./dev",
    "export": "sets the environment of the page's next commands",
}
#: ``airflow`` subcommands of those pages that a test here runs as written.
AIRFLOW_RUN = {("backfill", "create")}


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    argv: list[str]
    exit_code: int

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {shlex.join(self.argv)}"


def shell_lines(page: Path) -> list[tuple[int, str]]:
    """Every logical line of the page's fenced shell blocks: (line number, text without a ``$`` prompt)."""
    text = page.read_text(encoding="utf-8")
    found: list[tuple[int, str]] = []
    for block in FENCE.finditer(text):
        first_line = text.count("\n", 0, block.start(1)) + 1
        logical: list[tuple[int, str]] = []
        pending = ""
        for offset, raw in enumerate(block.group(1).splitlines()):
            line = raw.rstrip()
            if pending:
                pending += " " + line.strip()
            else:
                start, pending = first_line + offset, line.strip()
            if pending.endswith("\\"):
                pending = pending[:-1].rstrip()
                continue
            logical.append((start, pending))
            pending = ""
        found.extend((number, line.removeprefix("$ ").strip()) for number, line in logical if line.strip())
    return found


def kind_of(line: str) -> tuple[str, list[str]]:
    """What a shell line runs (``airflow-jrs``, ``airflow``, ``airflow_local``, ``dev``, ``export``,
    ``comment`` or ``other``) and its argv without leading ``NAME=value`` assignments."""
    try:
        argv = shlex.split(line, comments=True)
    except ValueError:  # not one shell command (a README's multi-line example): not ours to check
        return "other", [line]
    while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
        argv = argv[1:]
    if not argv:
        return "comment", argv
    head = Path(argv[0]).name
    if head in ("airflow-jrs", "airflow", "export"):
        return head, argv
    if head.startswith("python") and argv[1:2] == ["scripts/airflow_local.py"]:
        return "airflow_local", argv
    if argv[0] == "./dev":
        return "dev", argv
    return "other", argv


def documented_commands(page: Path) -> list[Command]:
    found: list[Command] = []
    for number, line in shell_lines(page):
        if not line.startswith("airflow-jrs"):
            continue
        comment = line.split(" #", 1)[1] if " #" in line else ""
        expected = re.search(r"\bexits? (\d+)\b", comment)
        argv = shlex.split(line, comments=True)
        argv = [PLACEHOLDERS.get(arg, arg) for arg in argv]
        found.append(
            Command(page.relative_to(ROOT).as_posix(), number, argv, int(expected.group(1)) if expected else 0)
        )
    return found


def _seed(url: str, namespace: str) -> None:
    store = RedisJobResultStore(url, namespace)
    for day in range(1, 32):
        for task in ("ingest", "ontime"):
            job_id = f"flights_daily.{task}.submit.2013-01-{day:02d}"
            run_id = f"scheduled__2013-01-{day:02d}T00:00:00+00:00"
            store.create_dirty_result(
                JobResult(
                    job_id=job_id,
                    status=JobStatus.SUCCEEDED,
                    outputs={"output": f"/data/output/{job_id}"},
                    metrics={"rows": 1000 + day},
                    attempt=Attempt("flights_daily", f"{task}.submit", run_id, 1),
                )
            )
            store.mark_result_as_clean(job_id)
    store.client.close()


def _run(command: Command, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [CLI, *command.argv[1:]]
    if command.argv[1:2] and command.argv[1] in ASKS and not {"--yes", "-y", "--dry-run"} & set(command.argv):
        # the reader answers the question at a terminal
        import pty

        primary, secondary = pty.openpty()
        try:
            os.write(primary, b"y\n")
            return subprocess.run(argv, cwd=ROOT, env=env, stdin=secondary, capture_output=True, text=True, timeout=300)
        finally:
            os.close(primary)
            os.close(secondary)
    return subprocess.run(
        argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300
    )


def _needs_airflow(argv: list[str]) -> bool:
    creates_backfills = argv[1:2] == ["backfill"] and "--missing-only" in argv and "--dry-run" not in argv
    return bool(NEEDS_AIRFLOW & set(argv[1:2])) or creates_backfills


def test_the_pages_show_airflow_jrs_commands():
    commands = [c for page in PAGES for c in documented_commands(page)]
    assert len(commands) >= 10 and {c.argv[1] for c in commands} >= {"plan", "forget", "show", "history", "dirty"}


@pytest.mark.parametrize("page", [p for p in PAGES if documented_commands(p)], ids=lambda p: p.name)
def test_documented_commands_run_as_written(page: Path, tmp_path: Path):
    commands = [c for c in documented_commands(page) if not _needs_airflow(c.argv)]
    if not commands:
        pytest.skip(f"{page.name}: its commands all need a running Airflow ({sorted(NEEDS_AIRFLOW)})")
    with EmbeddedRedis(tmp_path / "redis") as server:
        for namespace in (CONN_NAMESPACE, "prod"):  # the connection's, and the one the pages name
            _seed(server.url, namespace)
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(tmp_path / "airflow"),  # nothing of the machine's Airflow
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_JRS_DEFAULT": f"{server.url}?namespace={CONN_NAMESPACE}",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),  # the flights DAG imports its helpers from the repository
        }
        env.pop("AIRFLOW__CORE__DAGS_FOLDER", None)  # as a reader's shell: the page must name the folder
        failures = []
        for command in commands:
            done = _run(command, env)
            if done.returncode != command.exit_code or "Traceback" in done.stderr:
                failures.append(f"{command}\n  exit {done.returncode} (documented: {command.exit_code})\n"
                                f"  {done.stderr.strip()[-800:]}")  # fmt: skip
    assert not failures, "\n".join(failures)


# -- every command of the pages in EVERY_COMMAND_PAGES ---------------------------------------------


def test_every_command_of_these_pages_is_run_or_checked():
    unaccounted = []
    for page in EVERY_COMMAND_PAGES:
        for number, line in shell_lines(page):
            kind, argv = kind_of(line)
            airflow_run = kind == "airflow" and tuple(argv[1:3]) in AIRFLOW_RUN
            if kind not in ("airflow-jrs", "airflow_local", "comment", *LEFT_OUT) and not airflow_run:
                unaccounted.append(f"{page.relative_to(ROOT)}:{number}: {line}")
    assert not unaccounted, "commands no test runs or checks (add a check, or a reason to LEFT_OUT):\n" + "\n".join(
        unaccounted
    )


def test_local_airflow_commands_parse_as_written():
    """``scripts/airflow_local.py`` starts a whole Airflow until Ctrl-C (tests/e2e starts the same
    deployment): here each documented line must name the interpreter that exists and options the
    script's own parser accepts."""
    spec = importlib.util.spec_from_file_location("airflow_local", ROOT / "scripts" / "airflow_local.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    lines = [(page, n, argv) for page in PAGES for n, line in shell_lines(page) for kind, argv in [kind_of(line)]
             if kind == "airflow_local"]  # fmt: skip
    assert len(lines) >= 3
    for page, number, argv in lines:
        where = f"{page.relative_to(ROOT)}:{number}"
        assert (ROOT / argv[0]).exists() or argv[0].startswith("python"), f"{where}: no {argv[0]}"
        try:
            script.build_parser().parse_args(argv[2:])
        except SystemExit as exc:
            pytest.fail(f"{where}: scripts/airflow_local.py refuses {shlex.join(argv[2:])} (exit {exc.code})")


def test_airflow_backfill_create_as_written_and_again_as_the_page_says(tmp_path: Path):
    """The how-to's ``airflow backfill create`` line, run as written from the repository root in a
    reader's shell (only ``AIRFLOW_HOME`` and the DAG folder configured), creates the backfill; the
    same line again, while that backfill is active, fails with exit 1 and the very error the page
    quotes under "Right after another backfill". No scheduler runs here, so the first backfill stays
    active. About 50 s: a fresh metadata DB is migrated and the project's DAGs serialized (what the
    dag-processor does)."""
    page = ROOT / "docs" / "how-to" / "backfill.md"
    creates = [argv for _, line in shell_lines(page) for kind, argv in [kind_of(line)]
               if kind == "airflow" and tuple(argv[1:3]) == ("backfill", "create")]  # fmt: skip
    assert len(creates) == 1, creates
    quoted = [line for line in page.read_text(encoding="utf-8").splitlines() if "AlreadyRunningBackfill: " in line]
    assert len(quoted) == 1, "backfill.md must quote the AlreadyRunningBackfill line once"

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),  # the reader's Airflow, configured with the DAGs
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=str(ROOT),
    )

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=600)  # fmt: skip

    for setup in (["airflow", "db", "migrate"], ["airflow", "dags", "reserialize"]):
        done = run(*setup)
        assert done.returncode == 0, f"{shlex.join(setup)}: {done.stderr[-2000:]}"
    first = run(*creates[0])
    assert first.returncode == 0, f"{shlex.join(creates[0])}: {first.stderr[-2000:]}"
    again = run(*creates[0])
    assert again.returncode == 1, again.stderr[-2000:]
    # Case aside: the page quotes Airflow 3.3 ("per Dag"); Airflow 3.1 writes "per dag".
    assert quoted[0].strip().casefold() in again.stderr.casefold(), again.stderr[-2000:]
