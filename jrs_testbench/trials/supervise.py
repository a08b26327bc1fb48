"""``python -m jrs_testbench.trials.supervise ...``: the product's supervisor, with a revert applied.

Started in place of ``python -m airflow_jrs.launch.supervisor`` only when ``JRS_TRIALS_REVERT`` is set
(:class:`.launcher.StandInLauncher`), so a fix that lives in the supervisor can be reverted
there too (:func:`jrs_testbench.trials.reverts.apply_from_env`).
"""

from __future__ import annotations

import importlib.util

if __name__ == "__main__":
    if importlib.util.find_spec("jrs_testbench.trials.reverts") is not None:
        from jrs_testbench.trials import reverts  # type: ignore[attr-defined]

        reverts.apply_from_env()
    from airflow_jrs.launch.supervisor import main

    raise SystemExit(main())
