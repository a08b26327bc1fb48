"""Take one of the product's fixes back out of it, in this process only.

The fault trials must be able to fail: reverting any one of the fixes in :data:`REVERTS` (the
lease, fence, cleanup and cluster-mode fixes the trials were built to catch, the Connect session
release, the compact clean entry's) must make a trial run report a violation. Every trial process
(task attempt, cleanup, supervisor) calls :func:`apply_from_env` first; with
``JRS_TRIALS_REVERT=<n>`` in its environment it monkeypatches the product back to its behaviour
*before* fix ``n``. Nothing is written to disk and no other process is touched.

Each revert is minimal and faithful to the diff of the fix: a Lua script constant gets its old
text back (scripts are registered when a store, lease or heartbeat object is built, so this must
run before any is built), or a function is recompiled from its own source with the fix's lines
taken out (:func:`_recompile`), or wrapped to drop a check. Every revert first checks that the
code it patches still has the shape the fix gave it and raises :class:`RevertShapeError`
otherwise: a refactor must break the revert loudly, never turn it into a silent no-op (which
would make "the trials catch this defect" pass for the wrong reason).
"""

from __future__ import annotations
import __future__

import importlib
import inspect
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

#: Environment variable naming the fix to revert (:data:`REVERTS`); unset or empty: none.
ENV = "JRS_TRIALS_REVERT"


class RevertShapeError(RuntimeError):
    """The product code a revert patches no longer looks like the fix it reverts."""


def _replace_once(text: str, old: str, new: str, where: str) -> str:
    count = text.count(old)
    if count != 1:
        raise RevertShapeError(
            f"{where}: expected exactly one {old.strip()!r}, found {count}: the fix's code changed shape; "
            "update jrs_testbench/trials/reverts.py so the revert still takes the fix out"
        )
    return text.replace(old, new)


def _swap_script(name: str, edits: Sequence[tuple[str, str]]) -> None:
    """Give the Lua script constant ``<name>`` its pre-fix text (each ``old`` must occur once)."""
    from airflow_jrs.store.redis import heartbeats, intents, lease_scripts, result_scripts

    scripts = next(m for m in (result_scripts, lease_scripts, intents, heartbeats) if hasattr(m, name))
    text = getattr(scripts, name)
    for old, new in edits:
        text = _replace_once(text, old, new, f"{scripts.__name__}.{name}")
    setattr(scripts, name, text)


def _rebind(old: object, new: object) -> None:
    """Point every loaded module's global that is ``old`` (``from x import f``) at ``new``."""
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not namespace:
            continue
        for key, value in list(namespace.items()):
            if value is old:
                namespace[key] = new


def _recompile(owner: Any, name: str, edits: Sequence[tuple[str, str]]) -> None:
    """Replace ``owner.<name>`` (a module's function or a class's method) by the same source with
    ``edits`` applied, compiled against the same module globals."""
    func = inspect.getattr_static(owner, name)
    if isinstance(func, (staticmethod, classmethod)):
        raise RevertShapeError(f"{owner.__name__}.{name}: a static or class method; _recompile handles functions")
    where = f"{func.__module__}.{func.__qualname__}"
    source = textwrap.dedent(inspect.getsource(func))
    for old, new in edits:
        source = _replace_once(source, old, new, where)
    module = sys.modules[func.__module__]
    code = compile(source, f"<{where} reverted>", "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    local: dict[str, Any] = {}
    exec(code, module.__dict__, local)  # globals: the module's own, so later patches of it are seen
    new = local[name]
    setattr(owner, name, new)
    if inspect.ismodule(owner):
        _rebind(func, new)


def _require(module: Any, names: Sequence[str]) -> None:
    missing = [n for n in names if not hasattr(module, n)]
    if missing:
        raise RevertShapeError(f"{module.__name__} has no {missing}: the fix's code moved; update reverts.py")


def _cleanup_module() -> Any:
    """Where the cleanup's commit lives: the Airflow-free protocol module, else the operator's."""
    try:
        module = importlib.import_module("airflow_jrs.protocol.cleanup")
    except ModuleNotFoundError as exc:
        if exc.name != "airflow_jrs.protocol.cleanup":
            raise
        module = importlib.import_module("airflow_jrs.operators.cleanup")
    _require(module, ["folders_named_by", "CleanupView"])
    return module


# -- the nine reverts ----------------------------------------------------------------------------
def revert_1_adopted_folders() -> None:
    """Defect 1 (commit 1d59c75): the cleanup keeps only the folders of the result's own fence
    token and of live attempts, not the folders its outputs lie in.

    Breaks "every clean entry's outputs exist": a successor that adopted its predecessor's
    finished output writes the result under its own fence, naming the predecessor's
    ``fence-<N>-<nonce>`` folder; the cleanup removes that folder as a loser and commits the
    entry with its output gone."""
    module = _cleanup_module()
    if "folders_named_by(" not in inspect.getsource(module).replace("def folders_named_by(", ""):
        raise RevertShapeError(f"{module.__name__} no longer calls folders_named_by: update reverts.py")
    _recompile(module, "folders_named_by", [("    names = set()\n", "    return set()  # reverted: defect 1\n")])


def revert_2_cleanup_reads_once() -> None:
    """Defect 2 (commits 1d59c75, 16590cf): the cleanup reads the entry and the live fences once
    and commits "the job" whatever entry is there by then (no compare-and-set on the bytes read).

    Breaks "every clean entry's outputs exist" and "no write by a lower fence after a higher one
    was acknowledged": a recompute that writes a new result while a late cleanup runs has its
    staging removed as a loser, and the new entry is marked clean by a cleanup done for the old."""
    module = _cleanup_module()
    view = module.CleanupView
    source = inspect.getsource(view.live)
    for needle in ("self.intents.live_fences(", "current != self.entry"):
        if needle not in source:
            raise RevertShapeError(f"{module.__name__}.CleanupView.live lacks {needle!r}: update reverts.py")

    def live(self: Any) -> set[str]:  # the first read, kept: no re-read, no entry check
        if not hasattr(self, "_reverted_live"):
            self._reverted_live = self.intents.live_fences(self.entry.job_id)
        return set(self._reverted_live)

    view.live = live
    from airflow_jrs.store.results.base import JobResultStore

    mark = JobResultStore.mark_result_as_clean
    if "expected" not in inspect.signature(mark).parameters:
        raise RevertShapeError("JobResultStore.mark_result_as_clean takes no expected=: update reverts.py")

    def mark_result_as_clean(self: Any, job_id: str, *, expected: Any = None) -> bool:
        return mark(self, job_id)  # whatever entry is there now

    JobResultStore.mark_result_as_clean = mark_result_as_clean  # type: ignore[method-assign]


def revert_3_unfenced_forget() -> None:
    """Defect 3 (commits 745344b, 55ee60a): FORGET_RESULT is neither fenced nor a compare-and-set
    on the entry read.

    Breaks "every acknowledged SUCCEEDED is still there or superseded on purpose": a recomputing
    holder paused past its lease forgets the newer holder's committed result."""
    _swap_script(
        "FORGET_RESULT",
        [
            ("if not fence_ok(KEYS[6], ARGV[5]) then return -2 end\n", "-- reverted (defect 3): no fence check\n"),
            ("if v ~= ARGV[6] then return -4 end\n", "-- reverted (defect 3): no compare-and-set\n"),
        ],
    )


def revert_4_cluster_client_exit() -> None:
    """Defect 4 (commits 8649cf2, 11f00b6, a81e707): in cluster deploy modes the client's exit is
    taken as the driver's outcome: exit 0 publishes SUCCEEDED without a commit marker naming this
    job and fence, and a failed client drops the intent while the driver may still run.

    Breaks "never two applications at once" (the retry finds no intent and submits a second
    driver beside the first) and "every clean entry's outputs exist and hold what the marker
    says" (an empty or unfinished folder is published)."""
    from airflow_jrs.protocol.attempt import JobAttempt

    _recompile(
        JobAttempt,
        "_launch",
        [
            (
                "if launcher.cluster and not launcher.streaming and committed_marker(staging, job_id, token) is None:",
                "if False:  # reverted (defect 4): the client's exit is the outcome",
            )
        ],
    )
    _recompile(
        JobAttempt,
        "_after_failure",
        [
            (
                "ended = Ended(*launcher.outcome(launch, recorder, failed=True))",
                "ended = Ended()  # reverted (defect 4): the driver is not asked",
            )
        ],
    )


def revert_5_standalone_lookup() -> None:
    """Defect 5 (commits 8649cf2, 94a2fb8): a standalone master is asked for *applications* only
    (never drivers), on the first master of the list whatever its status, and an intent without
    a driver id does not hold back a new submission.

    Breaks "never two applications at once": a successor finds no predecessor for a queued,
    running or relaunching driver and submits a second one."""
    from airflow_jrs.launch.deploy_modes import standalone

    mode = standalone.StandaloneMode
    _recompile(
        mode,
        "cluster_predecessors",
        [
            (
                'for driver_id in (i for i in known_ids if i.startswith("driver-")):',
                "for driver_id in ():  # reverted (defect 5): drivers are never looked up",
            )
        ],
    )
    _recompile(mode, "_alive_state", [('if status == "ALIVE":', "if True:  # reverted (defect 5): the first master")])
    _recompile(
        standalone,
        "refuse_while_unrecorded_driver_may_run",
        [
            (
                "if not (isinstance(mode, StandaloneMode) and mode.cluster) or intent.application_id:",
                "if True:  # reverted (defect 5)",
            )
        ],
    )


def revert_6_token_only_fence() -> None:
    """Defect 6 (commits 371fddc, e380c8d, 50e3368, 1bb9478): a lease's identity is its token
    alone (no owner nonce): the lease stores none, every fenced script and ``Fence``'s ``==`` compare
    tokens, staging folders are ``fence-<N>``.

    Breaks "no write by a lower fence after a higher one was acknowledged" and "never two
    applications at once": after a failover that lost the counter's INCR, two attempts hold the
    same token and the stale one renews, writes, beats and releases the fresh one's lease."""
    from airflow_jrs.store.leases import lease
    from airflow_jrs.store.redis import leases

    _require(lease, ["new_nonce"])
    if "self.nonce = new_nonce()" not in inspect.getsource(lease.JobLease.__init__):
        raise RevertShapeError("JobLease no longer draws its nonce with new_nonce(): update reverts.py")
    lease.new_nonce = lambda: ""  # type: ignore[assignment]  # the lease scripts store no nonce for ''
    for method in ("acquire", "take_over"):  # the fence handed out is the bare token
        _recompile(leases.RedisJobLease, method, [("Fence(int(reply[1]), self.nonce)", "Fence(int(reply[1]))")])


def revert_7_heartbeat_recreated() -> None:
    """Defect 7 (commit f854ae4): a later beat that finds its heartbeat gone (or ended) creates it
    again and the supervisor keeps its application running.

    Breaks "never two applications at once": a heartbeat that expired early (a clock step on the
    Redis host, a failover, a pause) lets a successor start, and the orphan's supervisor brings
    the key back and runs on beside it."""
    _swap_script(
        "BEAT",
        [
            ("  if not held then return {-4, ''} end\n", ""),
            (
                "  if held ~= ARGV[1] then return {-2, ''} end\n",
                "  if held and held ~= ARGV[1] then return {-2, ''} end\n",
            ),
            ("  if redis.call('HGET', KEYS[1], 'state') ~= 'running' then return {-4, ''} end\n", ""),
        ],
    )


def revert_8_takeover_guesses_dead() -> None:
    """Defect 8 (commit 8d38241): fast takeover counts a holder dead when its pid cannot be
    inspected (psutil ``AccessDenied``), when it names no pid, and when neither side can read its
    pid space (two unknowns compare equal).

    Breaks "never two applications at once": a live holder's lease is taken over before its TTL
    and a second application starts beside its own."""
    from airflow_jrs.protocol import takeover

    _recompile(
        takeover,
        "_running",
        [
            ("    except psutil.NoSuchProcess:  # ZombieProcess", "    except psutil.Error:  # reverted (defect 8); "),
            ("    except psutil.Error:\n        return True\n", ""),
        ],
    )
    _recompile(takeover, "_holder_gone", [("    if not pid:\n        return False\n", "")])
    _recompile(
        takeover,
        "judge",
        [
            (
                '    if theirs is None or ours is None:  # two unknowns are not "the same pid space"\n'
                "        return Verdict(False, f\"the pid space of its pid {owner.get('pid')} on host {host} cannot be "
                'read here")\n',
                "",
            )
        ],
    )


def revert_9_own_nonce_unknown() -> None:
    """Defect 9 (commit 371fddc): ACQUIRE_LEASE and TAKE_OVER_LEASE do not recognise the
    caller's own nonce, so a command redis-py sent again after a lost reply finds "another
    holder" that is itself.

    Breaks "no job stuck without a message that says what it waits for": the attempt fails with
    ``LeaseHeldError`` naming itself (or waits a whole TTL for itself)."""
    own = (
        "  if held[2] and held[2] == nonce then\n"
        "    redis.call('PEXPIRE', lease_key, ttl)\n"
        "    return {1, held[1]}\n"
        "  end\n"
    )
    for script in ("ACQUIRE_LEASE", "TAKE_OVER_LEASE"):
        _swap_script(script, [(own, "  -- reverted (defect 9): the caller's own nonce is not recognised\n")])


def revert_10_connect_release() -> None:
    """Defect 10 (commit c41936e, found by the Connect trials): ``ConnectLauncher``
    released its session after the interrupt even when an operation still ran in it (one between
    its analysis and its first Spark job ignores the interrupt); the released session answers
    SESSION_CLOSED, which a successor reads as "nothing runs". Reverted: always released.

    Breaks "two copies of one job never run at the same time" on Spark Connect: the successor
    computes beside the leftover query."""
    from airflow_jrs.launch import connect_launcher

    if not hasattr(connect_launcher.ConnectLauncher, "_release"):
        raise RevertShapeError("ConnectLauncher._release is gone: update revert_10_connect_release")
    connect_launcher.ConnectLauncher._release = lambda self, spark: spark.stop()  # type: ignore[method-assign]


# -- the compact clean entry's (``[jrs] result_documents``) ------------------------------------------
def revert_11_reference_before_document() -> None:
    """Defect 11 (commit beae2d0, pinned by be9745c): the commit writes the result document
    *before* the script that replaces the dirty entry by its reference. Reverted: the reference
    first, then the document.

    Breaks "every clean entry's outputs exist" (and Done is done with a result nobody can read):
    a cleanup whose document write fails (a folder not mounted, a full disk, a kill between the
    two) leaves a clean reference pointing at no document, and the dirty entry holding the full
    result is gone; every later cleanup finds the job "already clean"."""
    from airflow_jrs.store.redis.results import RedisJobResultStore

    _recompile(
        RedisJobResultStore,
        "_committing",
        [
            (
                "    write_document(self.result_documents, self.namespace, expected)\n",
                "    # reverted (defect 11): the document is written after the reference\n",
            )
        ],
    )
    _recompile(
        RedisJobResultStore,
        "_mark_result_as_clean",
        [
            (
                "    if code == lua.OK:\n        return True\n",
                "    if code == lua.OK:\n"
                "        if as_reference:  # reverted (defect 11): the reference first, then the document\n"
                "            write_document(self.result_documents, self.namespace, expected)\n"
                "        return True\n",
            )
        ],
    )


def revert_12_documents_folder_created() -> None:
    """Defect 12 (commit d5a881d): a result documents folder that is not there is created (the
    write makes every folder on the document's path) instead of failing the cleanup.

    Breaks "every clean entry's outputs exist" across hosts: a cleanup on a host where the shared
    folder is not mounted writes the document to that host's own disk and commits the reference;
    every other host (the checker reads the shared folder) finds the document missing."""
    from airflow_jrs.store.results import documents

    if "self._reachable()" not in inspect.getsource(documents.FolderDocuments.put):
        raise RevertShapeError("FolderDocuments.put no longer checks _reachable(): update reverts.py")
    documents.FolderDocuments._reachable = lambda self: None  # type: ignore[method-assign]


#: The fixes by number (1-9: lease, fence, cleanup and cluster-mode fixes; 10: the Connect session
#: release; 11-12: the compact clean entry's): each function takes that fix back out.
REVERTS: dict[int, Callable[[], None]] = {
    1: revert_1_adopted_folders,
    2: revert_2_cleanup_reads_once,
    3: revert_3_unfenced_forget,
    4: revert_4_cluster_client_exit,
    5: revert_5_standalone_lookup,
    6: revert_6_token_only_fence,
    7: revert_7_heartbeat_recreated,
    8: revert_8_takeover_guesses_dead,
    9: revert_9_own_nonce_unknown,
    10: revert_10_connect_release,
    11: revert_11_reference_before_document,
    12: revert_12_documents_folder_created,
}

_applied: set[int] = set()


def apply(number: int) -> None:
    """Revert fix ``number`` in this process (once; a second call is a no-op)."""
    if number not in REVERTS:
        raise ValueError(f"{ENV} must be one of {sorted(REVERTS)} (the fixes), got {number!r}")
    if number not in _applied:
        REVERTS[number]()
        _applied.add(number)


def apply_from_env(environ: dict[str, str] | None = None) -> int | None:
    """Revert the fix named by ``JRS_TRIALS_REVERT`` (unset or empty: nothing); returns its number.
    Call it at process start, before any store, lease or heartbeat object is built."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not raw:
        return None
    try:
        number = int(raw)
    except ValueError:
        raise ValueError(f"{ENV} must be a number {min(REVERTS)}-{max(REVERTS)} (the fixes), got {raw!r}") from None
    apply(number)
    return number
