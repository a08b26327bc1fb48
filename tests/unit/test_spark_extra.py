"""The ``spark`` extra installs what a guarded Spark task needs, and nothing that logs a false alarm.

pyspark 4.3 warns (``FutureWarning``) on every import of pandas 3, and a user's install resolved
pandas 3.1.1 when nothing bounded it (issue 41): the extra bounds pandas below 3. The locks pin a
pandas inside that bound, so the tests run what the extra allows.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def test_the_spark_extra_bounds_pandas_below_3_and_every_lock_is_inside_it() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["spark"]
    pandas = next(Requirement(r) for r in extra if Requirement(r).name == "pandas")
    assert not pandas.specifier.contains("3.0.0") and not pandas.specifier.contains("3.1.1")
    for lock in [ROOT / "requirements.lock", *sorted((ROOT / "locks").glob("airflow-*.lock"))]:
        pinned = re.search(r"^pandas==(\S+)$", lock.read_text(), re.MULTILINE)
        assert pinned and pandas.specifier.contains(Version(pinned.group(1))), lock.name
