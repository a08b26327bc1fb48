"""``scripts/airflow_local.py``'s home: its ``airflow.cfg`` makes ``AIRFLOW_HOME=<home> airflow ...``
see the deployment's DAG folder without Airflow's example DAGs.

The test reads the home's config with Airflow's own parser in a fresh process with only
``AIRFLOW_HOME`` set, after the ``airflow`` CLI wrote its default file (3 processes, a few seconds
each: the airflow tier). The port the script keeps per home: tests/unit/test_airflow_local_script.py.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def airflow_local() -> ModuleType:
    spec = importlib.util.spec_from_file_location("airflow_local", ROOT / "scripts" / "airflow_local.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cli_config(home: Path) -> tuple[str, str]:
    """``[core] load_examples`` and ``dags_folder`` as every ``airflow`` command of a reader's shell
    reads them: Airflow's own config parser, only ``AIRFLOW_HOME`` set (one process, not two CLIs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["AIRFLOW_HOME"] = str(home)
    code = (
        "from airflow.configuration import conf; "
        "print(conf.get('core', 'load_examples'), conf.get('core', 'dags_folder'))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    load_examples, dags_folder = done.stdout.strip().splitlines()[-1].split(" ", 1)
    return load_examples, dags_folder


@pytest.mark.airflow
def test_the_cli_of_the_home_sees_our_dags_and_no_examples(airflow_local: ModuleType, tmp_path: Path):
    home, dags = tmp_path / "home", tmp_path / "my-dags"
    dags.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    first = subprocess.run(  # the airflow CLI writes its default airflow.cfg, as the deployment's first start does
        [str(Path(sys.executable).parent / "airflow"), "config", "get-value", "core", "load_examples"],
        env={**env, "AIRFLOW_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.stdout.strip() == "True", first.stderr  # Airflow's default: its example DAGs
    cfg = home / "airflow.cfg"
    lines_before = len(cfg.read_text().splitlines())
    airflow_local.write_cli_config(home, dags)
    assert _cli_config(home) == ("False", str(dags))
    assert len(cfg.read_text().splitlines()) == lines_before  # two lines changed, the rest kept

    fresh = tmp_path / "fresh-home"  # no file yet: one with just those settings
    airflow_local.write_cli_config(fresh, dags)
    assert _cli_config(fresh) == ("False", str(dags))
