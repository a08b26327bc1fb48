"""Fault trials that drive the product's own code.

Each trial is one job run as Airflow would run it, by the product's
:class:`airflow_jrs.protocol.JobAttempt` in real processes: tries with a stand-in application
(:mod:`.app`) under the real supervisor (:mod:`.launcher`, :mod:`.task`), the real cleanup
(:mod:`.cleanup`), recompute and stop requests, faults per try and per run (:mod:`.faults`,
:mod:`.trial`, :mod:`.runner`; the Redis side is :mod:`.redis_front`), and a checker that reads
the history recorded outside the product, the store and the folders (:mod:`.checker`)::

    from jrs_testbench.trials.runner import RunConfig, run_trials
    outcome = run_trials(RunConfig(trials=200, seed=7, workdir=tmp))
    assert not outcome.violations, outcome.summary()

Nothing is imported here: the stand-in application (``python -m jrs_testbench.trials.app``)
must start without the product.
"""
