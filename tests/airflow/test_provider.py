"""airflow-jrs is a registered Airflow provider: entry point, hook, [jrs] config section."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from airflow_jrs.get_provider_info import get_provider_info
from airflow_jrs.settings import SETTINGS

pytestmark = pytest.mark.airflow


def airflow(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "airflow", *args], capture_output=True, text=True, env=os.environ)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_airflow_lists_the_provider_and_its_hook():
    line = [ln for ln in airflow("providers", "get", "airflow-jrs", "-o", "json").splitlines() if ln.startswith("[")]
    assert json.loads(line[-1]) == [{"Provider": "airflow-jrs", "Version": "0.1.0"}]
    assert "airflow_jrs.hooks.jrs.JrsHook" in airflow("providers", "hooks")


def test_provider_info_declares_every_jrs_option_and_importable_modules():
    info = get_provider_info()
    assert info["package-name"] == "airflow-jrs"
    assert set(info["config"]["jrs"]["options"]) == {s.name for s in SETTINGS}
    import importlib

    for kind in ("operators", "sensors", "hooks", "triggers"):
        for entry in info[kind]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
