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
import sys
from pathlib import Path

#: ``write_output=True``: what the stand-in does with the application's ``--output DIR`` (the
#: operator's ``{jrs_output}``): one data file, then the commit marker, as tiny_app does.
_WRITING = """#!{python}
import json, os, sys
with open({calls!r}, "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
args, conf = sys.argv[1:], {{}}
for i, arg in enumerate(args[:-1]):
    if arg == "--conf" and "=" in args[i + 1]:
        key, _, value = args[i + 1].partition("=")
        conf[key] = value
if "--output" in args:
    out = args[args.index("--output") + 1]
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    with open(os.path.join(out, "data", "part-00000"), "w") as fh:
        fh.write("1\\n")
    fence = conf.get("spark.jrs.fence")
    marker = {{"v": 1, "application_id": "local-fake-%d" % os.getpid(), "job_id": conf.get("spark.jrs.job_id"),
              "fence": int(fence) if fence and fence.isdigit() else fence, "metrics": {{"rows": 1}}}}
    with open(os.path.join(out, "_JRS_COMMIT.json"), "w") as fh:
        json.dump(marker, fh)
"""


def install_fake_spark_submit(directory: str | os.PathLike[str], *, write_output: bool = False) -> tuple[Path, Path]:
    """``(bin_dir, calls)``: prepend ``bin_dir`` to ``PATH``; ``calls`` gets one line per launch.

    ``write_output``: also write the application's ``--output`` folder (a data file and the commit
    marker), so that what a result names exists, as after a real application (for invariants
    such as :func:`jrs_testbench.invariants.assert_clean_outputs_exist`)."""
    bin_dir = Path(directory) / "fake-spark-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    calls = Path(directory) / "spark-submit-calls"
    script = bin_dir / "spark-submit"
    if write_output:
        script.write_text(_WRITING.format(python=sys.executable, calls=str(calls)))
    else:
        script.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(calls))}\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir, calls


def launches(calls: Path) -> int:
    """How many times the fake ran."""
    return len(calls.read_text().splitlines()) if calls.exists() else 0
