"""The pandas pinned for pyspark 4.3: every Spark log carried pandas' FutureWarning
"PySpark does not yet fully support pandas >= 3.0.0" while requirements.lock pinned pandas 3.

pyspark 4.3 asks for pandas >= 2.2.0 (``pyspark/sql/pandas/utils.py``) and warns from 3.0.0 on:
the lock pins the newest 2.x, and the virtualenv has it."""

from __future__ import annotations

import re
import warnings
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_pyspark_accepts_the_pinned_pandas_without_a_warning():
    from pyspark.sql.pandas.utils import require_minimum_pandas_version

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        require_minimum_pandas_version()
    assert [str(w.message) for w in caught if "pandas" in str(w.message)] == []


def test_the_lock_pins_the_pandas_installed_and_below_3():
    pinned = re.search(r"^pandas==(\S+)$", (ROOT / "requirements.lock").read_text(), re.M)
    assert pinned is not None
    assert pinned.group(1) == version("pandas")
    assert int(pinned.group(1).split(".")[0]) < 3
