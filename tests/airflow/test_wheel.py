"""The built wheel ships the provider, ``airflow_jrs``, and nothing of the repository around it.

The test bench (``jrs_testbench``: redis-server launcher, local deployment, fault injection),
the tests and the example DAGs stay in the repository. The wheel is built as pip builds it
(``pip wheel --no-build-isolation``, with the venv's setuptools) from a copy of the working
tree: a build in the tree itself would leave ``build/`` there, and setuptools ships whatever
stale files an earlier build left in ``build/lib``.

The wheel is then installed into a fresh virtualenv (see the ``installed`` fixture for how,
without downloading Airflow) to prove what a user's ``pip install`` gets: the package from the
wheel, the ``airflow-jrs`` script, the provider and plugin entry points; and its metadata claims
the Pythons Airflow 3.3 supports from 3.11 on.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

#: The airflow tier (tests/airflow): it builds a wheel and a virtualenv and starts Python processes
#: that load Airflow's entry points, tens of seconds the fast tier (./dev check) leaves out.
pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]
#: Top-level folders not copied: the venv, git, earlier build output, local data.
NOT_COPIED = {".git", ".venv", "build", "dist", "data"}
DIST_INFO = re.compile(r"airflow_jrs-[^/]+\.dist-info/")
#: Folders and file names of what only the repository has (the last two lived in airflow_jrs once).
REPOSITORY_ONLY = {"jrs_testbench", "tests", "deployment"}
REPOSITORY_FILES = {"conftest.py", "faults.py", "embedded_redis.py"}


def _not_copied(directory: str, names: list[str]) -> set[str]:
    top = Path(directory) == ROOT
    return {
        name
        for name in names
        if (top and name in NOT_COPIED) or name == "__pycache__" or name.endswith((".egg-info", "_cache"))
    }


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the working tree, built from (and compared against) instead of the tree itself."""
    copy = tmp_path_factory.mktemp("wheel") / "source"
    shutil.copytree(ROOT, copy, ignore=_not_copied)
    return copy


@pytest.fixture(scope="module")
def wheel(source: Path) -> Iterator[zipfile.ZipFile]:
    dist = source.parent / "dist"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check"]
    proc = subprocess.run([*cmd, "-w", str(dist), str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (built,) = dist.glob("airflow_jrs-*.whl")
    with zipfile.ZipFile(built) as zf:
        yield zf


@pytest.fixture(scope="module")
def wheel_file(wheel: zipfile.ZipFile) -> Path:
    assert wheel.filename is not None
    return Path(wheel.filename)


def test_wheel_holds_only_the_package_and_its_metadata(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    assert "airflow_jrs/__init__.py" in names
    assert [n for n in names if not (n.startswith("airflow_jrs/") or DIST_INFO.match(n))] == []


def test_wheel_ships_nothing_of_the_test_bench_tests_or_dags(wheel: zipfile.ZipFile) -> None:
    offenders = [
        name
        for name in wheel.namelist()
        if REPOSITORY_ONLY & set(name.split("/")[:-1]) or name.rsplit("/", 1)[-1] in REPOSITORY_FILES
    ]
    assert offenders == []


def test_wheel_ships_every_module_of_the_package(wheel: zipfile.ZipFile, source: Path) -> None:
    """A subpackage that package discovery missed would import in the repository and fail installed."""
    in_tree = {p.relative_to(source).as_posix() for p in (source / "airflow_jrs").rglob("*.py")}
    assert in_tree - set(wheel.namelist()) == set()


def test_no_shipped_module_names_a_repository_path(wheel: zipfile.ZipFile, source: Path) -> None:
    """Installed, the repository is not there: a path into it works only on the machine that built it."""
    needles = (str(ROOT), str(source), "dags/flights", "tests/")
    offenders = [
        f"{name}: {needle}"
        for name in wheel.namelist()
        if name.endswith(".py")
        for needle in needles
        if needle in wheel.read(name).decode()
    ]
    assert offenders == []


def test_wheel_ships_the_typing_marker(wheel: zipfile.ZipFile, source: Path) -> None:
    if not (source / "airflow_jrs" / "py.typed").exists():
        pytest.skip("airflow_jrs has no py.typed marker")
    assert "airflow_jrs/py.typed" in wheel.namelist()


# -- metadata: the Pythons we claim --------------------------------------------------------------
def _metadata(wheel: zipfile.ZipFile) -> Any:
    (name,) = [n for n in wheel.namelist() if DIST_INFO.match(n) and n.endswith("/METADATA")]
    return Parser().parsestr(wheel.read(name).decode())


def _python_classifiers(classifiers: list[str]) -> set[str]:
    return {c.rsplit(" :: ", 1)[1] for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}


def test_requires_python_covers_what_airflow_supports_from_311(wheel: zipfile.ZipFile) -> None:
    """The wheel claims exactly the Pythons Airflow 3.3 supports, from 3.11 on.

    Below 3.11 the package cannot import (``enum.StrEnum``, ``datetime.UTC``); above what
    Airflow supports nothing of ours could be installed anyway. Checked against the installed
    ``apache-airflow-core``'s own metadata, so an Airflow upgrade that adds a Python shows here.
    """
    meta = _metadata(wheel)
    ours = SpecifierSet(meta["Requires-Python"])
    claimed = _python_classifiers(meta.get_all("Classifier") or [])
    airflow = distribution("apache-airflow-core").metadata
    airflow_versions = _python_classifiers(airflow.get_all("Classifier") or [])
    airflow_spec = SpecifierSet(airflow["Requires-Python"])
    expected = {v for v in airflow_versions if tuple(map(int, v.split("."))) >= (3, 11)}
    assert claimed == expected, f"classifiers {sorted(claimed)}; Airflow supports {sorted(airflow_versions)}"
    for version in claimed:
        assert f"{version}.0" in ours and f"{version}.0" in airflow_spec, version
    assert "3.10.0" not in ours and f"{sys.version_info.major}.{sys.version_info.minor}.0" in ours
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert SpecifierSet(pyproject["requires-python"]) == ours


# -- installed into a fresh virtualenv -----------------------------------------------------------
#: Run inside the fresh venv: where things were imported from, and the entry points they declare.
PROBE = textwrap.dedent(
    """
    import json, sys
    from importlib.metadata import distribution, entry_points

    import airflow_jrs

    dist = distribution("airflow-jrs")
    provider = [ep for ep in entry_points(group="apache_airflow_provider") if ep.dist.name == dist.name]
    plugins = [ep for ep in entry_points(group="airflow.plugins") if ep.dist.name == dist.name]
    info = provider[0].load()()
    loaded = {ep.name: ep.load() for ep in plugins}  # imports airflow_jrs.plugins (and Airflow)
    print(json.dumps({
        "package": airflow_jrs.__file__,
        "version": airflow_jrs.__version__,
        "dist": str(dist.locate_file("")),
        "provider_entry_points": [ep.value for ep in provider],
        "provider_name": info["package-name"],
        "modules": [m for kind in ("operators", "sensors", "hooks", "triggers")
                    for item in info.get(kind, []) for m in item["python-modules"]],
        "plugin_entry_points": {name: ep.value for name, ep in zip(loaded, plugins)},
        "plugin_classes": {name: obj.__module__ + "." + obj.__qualname__ for name, obj in loaded.items()},
        "scripts": [ep.value for ep in entry_points(group="console_scripts") if ep.dist.name == dist.name],
    }))
    """
)


@pytest.fixture(scope="module")
def installed(wheel_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The wheel ``pip install``ed into a fresh virtualenv, without the network.

    Why this way: a truly empty venv would have to download Airflow and its ~150 dependencies
    (hundreds of MB, minutes, and no network here). What this test must prove is narrower: that
    the *wheel* (not the working tree) installs, and that its console script and both entry
    points (``apache_airflow_provider``, ``airflow.plugins``) exist and import. So the fresh
    venv gets the project venv's site-packages as a plain path in a ``.pth`` file: the
    dependencies resolve, but that directory's own ``.pth`` files are not run, so the
    project's *editable* install of airflow_jrs (a ``.pth`` finder) is invisible, and the fresh
    venv's own site-packages comes first on ``sys.path``. The wheel goes in with
    ``pip install --no-deps --no-index``, through the project's pip (``--python``: the fresh
    venv needs no pip of its own). The probe then asserts that every import and entry point
    was resolved from the fresh venv, not from the repository.
    """
    root = tmp_path_factory.mktemp("fresh-venv")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    project_site = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "_project_dependencies.pth").write_text(project_site + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    proc = subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", str(wheel_file)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Outside the repository, with an Airflow home of its own: nothing may come from the tree.
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AIRFLOW_HOME") and not k.startswith("AIRFLOW__")
    }
    env["AIRFLOW_HOME"] = str(root / "airflow-home")
    probe = subprocess.run(
        [str(python), "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=root, env=env
    )  # fmt: skip
    assert probe.returncode == 0, probe.stdout[-3000:] + probe.stderr[-3000:]
    cli = subprocess.run(
        [str(env_dir / "bin" / "airflow-jrs"), "--help"], capture_output=True, text=True, timeout=120, cwd=root, env=env
    )  # fmt: skip
    return {
        "venv": env_dir,
        "purelib": Path(purelib),
        "probe": json.loads(probe.stdout.strip().splitlines()[-1]),
        "cli": cli,
    }


def test_installed_package_comes_from_the_wheel_not_the_repository(installed: dict[str, Any]) -> None:
    probe, purelib = installed["probe"], installed["purelib"]
    assert Path(probe["package"]).is_relative_to(purelib), probe["package"]
    assert Path(probe["dist"]).resolve() == purelib.resolve()
    assert not Path(probe["package"]).is_relative_to(ROOT)


def test_provider_entry_point_is_installed_and_names_modules_that_exist(installed: dict[str, Any]) -> None:
    probe, purelib = installed["probe"], installed["purelib"]
    assert probe["provider_entry_points"] == ["airflow_jrs.get_provider_info:get_provider_info"]
    assert probe["provider_name"] == "airflow-jrs"
    missing = [m for m in probe["modules"] if not (purelib / (m.replace(".", "/") + ".py")).exists()]
    assert probe["modules"] and missing == []


def test_plugin_entry_point_loads_the_ui_plugin(installed: dict[str, Any]) -> None:
    """Every ``airflow.plugins`` entry point the package declares imports, and is an AirflowPlugin."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("entry-points", {})
    expected = declared.get("airflow.plugins", {})
    if not expected:
        pytest.skip("the package declares no airflow.plugins entry point")
    assert installed["probe"]["plugin_entry_points"] == expected
    for name, target in expected.items():
        assert installed["probe"]["plugin_classes"][name] == target.replace(":", "."), name
    # The plugin's pages are package data: a page missing from the install is a blank view.
    static = ROOT / "airflow_jrs" / "plugins" / "static"
    shipped = [p.relative_to(ROOT).as_posix() for p in static.rglob("*") if p.is_file()] if static.is_dir() else []
    assert [f for f in shipped if not (installed["purelib"] / f).exists()] == []


def test_console_script_runs_from_the_fresh_venv(installed: dict[str, Any]) -> None:
    assert installed["probe"]["scripts"] == ["airflow_jrs.cli:main"]
    cli = installed["cli"]
    assert cli.returncode == 0, cli.stdout[-2000:] + cli.stderr[-2000:]
    out = cli.stdout.lower()
    assert "airflow-jrs" in out and "forget" in out and "purge" in out


def test_airflow_finds_the_plugin_once_with_the_repository_on_sys_path() -> None:
    # The deployments put the repository on PYTHONPATH (the DAGs import jrs_testbench): an
    # ``airflow_jrs.egg-info`` left in its root by the editable install was a second copy of the
    # entry points, and every Airflow process logged "Plugin 'airflow_jrs' already registered".
    code = (
        "from airflow._shared.module_loading import entry_points_with_dist as eps\n"
        "import json\n"
        "print(json.dumps([str(d._path) for ep, d in eps('airflow.plugins') if ep.value.startswith('airflow_jrs')]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = done.stdout.strip().splitlines()[-1]
    assert len(json.loads(found)) == 1, f"the plugin's entry point is found in {found}: run ./dev setup"
    assert not list(ROOT.glob("*.egg-info")), "./dev's editable install must not leave an egg-info in the repository"


# -- the source archive ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sdist(source: Path) -> Path:
    """The sdist, built by the project's build backend (setuptools) from the copy of the tree, as
    ``python -m build --sdist`` would (the backend's PEP 517 hook, without build isolation)."""
    dist = source.parent / "sdist"
    hook = f"from setuptools import build_meta; print(build_meta.build_sdist({str(dist)!r}))"
    proc = subprocess.run([sys.executable, "-c", hook], cwd=source, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return dist / proc.stdout.strip().splitlines()[-1]


def test_the_sdist_builds_the_same_wheel_as_the_tree(sdist: Path, wheel: zipfile.ZipFile) -> None:
    """A user who installs from the source archive gets the package the wheel ships: every module,
    the plugin's built pages and the typing marker (a file the sdist leaves out would be missing
    only from installs built from it)."""
    out = sdist.parent / "from-sdist"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check"]
    proc = subprocess.run([*cmd, "-w", str(out), str(sdist)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (built,) = out.glob("airflow_jrs-*.whl")
    with zipfile.ZipFile(built) as from_sdist:
        assert sorted(from_sdist.namelist()) == sorted(wheel.namelist())


# -- a guarded task, from the installed wheel ------------------------------------------------------
#: Run inside the fresh venv: a @task.jrs_pyspark's operator computes a job, then skips it.
GUARDED_TASK = textwrap.dedent(
    """
    import json, sys
    from datetime import datetime, timezone
    from types import SimpleNamespace

    import airflow_jrs
    from airflow_jrs.operators.pyspark import JrsPySparkOperator

    def rows(spark=None, jrs=None):
        spark.range(5).coalesce(1).write.parquet(f"{jrs.output}/data")
        return {"rows": 5}

    op = JrsPySparkOperator(task_id="t", python_callable=rows, conn_id="spark_local", outputs={"data": "data"},
                            config_kwargs={"spark.ui.enabled": "false"})
    """
)


@pytest.mark.spark
def test_a_guarded_task_computes_then_skips_from_the_installed_wheel(
    installed: dict[str, Any], redis_url: str, namespace: str, tmp_path: Path
) -> None:
    """Not only imports: the installed wheel runs a guarded job on a real local SparkSession and a
    real Redis, and its second run reuses the result without Spark, every module of airflow_jrs
    loaded from the fresh venv (the repository is not on ``sys.path``)."""
    from airflow_jrs.store import RedisJobResultStore

    python = str(installed["venv"] / "bin" / "python")
    first, second = _run_two_tries(installed, tmp_path, redis_url, namespace, GUARDED_TASK, PYSPARK_PYTHON=python)
    assert (first["status"], first["reused"], second["reused"]) == ("SUCCEEDED", False, True)
    entry = RedisJobResultStore(redis_url, namespace).get_entry(first["job_id"])
    assert entry is not None and entry.result.metrics == {"rows": 5}
    assert (Path(first["outputs"]["data"]) / "_SUCCESS").exists()


#: Run inside the fresh venv: a JrsSparkSubmitOperator computes a job on the stand-in
#: spark-submit (first on PATH), then skips it. No JVM: it runs beside every Airflow minor.
GUARDED_SUBMIT = textwrap.dedent(
    """
    import json, sys
    from datetime import datetime, timezone
    from types import SimpleNamespace

    import airflow_jrs
    from airflow_jrs.operators import JrsSparkSubmitOperator

    op = JrsSparkSubmitOperator(task_id="t", application=sys.argv[1], application_args=["--output", "{jrs_output}"],
                                conn_id="spark_local", outputs={"data": "data"})
    """
)

#: Appended to each script above: two tries of ``op`` for one date; what each returned, printed.
TWO_TRIES = textwrap.dedent(
    """
    day = datetime(2013, 1, 1, tzinfo=timezone.utc)
    payloads = []
    for try_number in (1, 2):
        ti = SimpleNamespace(dag_id="wheel", task_id="t", try_number=try_number, map_index=-1,
                             xcom_push=lambda **kw: None)
        context = {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": day, "logical_date": day}
        payloads.append(op.execute(context))
    print("RESULT " + json.dumps({"package": airflow_jrs.__file__, "payloads": payloads}))
    """
)


def _run_two_tries(
    installed: dict[str, Any],
    tmp_path: Path,
    redis_url: str,
    namespace: str,
    source: str,
    *args: str,
    **env_vars: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``source`` + :data:`TWO_TRIES` with the fresh venv's Python, outside the repository and
    with its own Airflow home; the two payloads, once the package proved to come from the wheel."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME") and not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow-home"),
        AIRFLOW_CONN_JRS_DEFAULT=f"{redis_url}?namespace={namespace}",
        AIRFLOW_CONN_SPARK_LOCAL=json.dumps({"conn_type": "spark", "host": "local[1]"}),
        AIRFLOW__JRS__OUTPUT_ROOT=str(tmp_path / "output"),
        AIRFLOW__JRS__SPEC_ROOT=str(tmp_path / "specs"),
        **env_vars,
    )
    script = tmp_path / "guarded_task.py"  # a file: a function's fingerprint is made from its source
    script.write_text(source + TWO_TRIES)
    done = subprocess.run([str(installed["venv"] / "bin" / "python"), str(script), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (answer,) = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert Path(answer["package"]).is_relative_to(installed["purelib"]), answer["package"]
    first, second = answer["payloads"]
    return first, second


def test_a_guarded_submit_computes_then_skips_from_the_installed_wheel_on_this_minor(
    installed: dict[str, Any], redis_url: str, namespace: str, tmp_path: Path
) -> None:
    """The installed wheel beside this venv's Airflow minor (``scripts/older_airflow`` runs this
    file in each minor's venv) runs a guarded spark-submit job through its own supervisor, on
    the stand-in spark-submit, and reuses the result on the second run: one launch."""
    from airflow_jrs.store import RedisJobResultStore
    from jrs_testbench.fake_spark import install_fake_spark_submit, launches

    bin_dir, calls = install_fake_spark_submit(tmp_path, write_output=True)
    app = tmp_path / "app.py"
    app.write_text("raise SystemExit('the stand-in spark-submit never runs this')\n")
    path = f"{bin_dir}{os.pathsep}{installed['venv'] / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    first, second = _run_two_tries(installed, tmp_path, redis_url, namespace, GUARDED_SUBMIT, str(app), PATH=path)
    assert (first["status"], first["reused"], second["reused"]) == ("SUCCEEDED", False, True)
    assert launches(calls) == 1
    entry = RedisJobResultStore(redis_url, namespace).get_entry(first["job_id"])
    assert entry is not None and entry.result.status.value == "SUCCEEDED"
