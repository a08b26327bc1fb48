"""The Spark provider's own SparkSubmitOperator tests pass for ours as for the provider
(scripts/provider_suite.py: the pinned sdist's test file, run on both, compared test by test)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jrs_testbench.helpers import ROOT

pytestmark = [pytest.mark.airflow]


def test_every_provider_test_that_passes_for_the_provider_passes_for_ours_or_is_a_named_design_difference():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "provider_suite.py")], capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "REGRESSION" not in proc.stdout
