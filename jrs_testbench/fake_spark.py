"""A stand-in ``spark-submit`` for tests about what happens around Spark, not in it.

:func:`install_fake_spark_submit` writes an executable ``spark-submit`` into a folder; put that
folder first on ``PATH`` and the Spark provider's hook runs it instead of the JVM. It appends
its command line to a file (one line per launch, the effect tests count) and exits 0, so an
operator goes on to write its result in milliseconds instead of 10-20 s of JVM start.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path


def install_fake_spark_submit(directory: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(bin_dir, calls)``: prepend ``bin_dir`` to ``PATH``; ``calls`` gets one line per launch."""
    bin_dir = Path(directory) / "fake-spark-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    calls = Path(directory) / "spark-submit-calls"
    script = bin_dir / "spark-submit"
    script.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(calls))}\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir, calls


def launches(calls: Path) -> int:
    """How many times the fake ran."""
    return len(calls.read_text().splitlines()) if calls.exists() else 0
