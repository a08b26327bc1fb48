"""``./dev``: what each command installs (``./dev demo`` installed ``faketime``, which only the
clock-step fault tests need; Node.js is for the UI's checks, which only ``test`` and ``check`` run).

The script's own functions run under bash, with each ``ensure_*`` replaced by a recorder, so the
test sees which installs ``setup`` (used by ``demo`` and ``setup``) and the ``test`` command do,
without installing anything."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]
ENSURES = ("ensure_java", "ensure_redis_server", "ensure_faketime", "ensure_venv", "ensure_chromium", "ensure_node")


def called(body: str) -> list[str]:
    """The ``ensure_*`` functions ``body`` calls, run after the script's own definitions."""
    script = (ROOT / "dev").read_text()
    prelude = script.split("\ncmd=${1:-help}", 1)[0]
    recorders = "\n".join(f"{name}() {{ echo {name}; }}" for name in ENSURES)
    done = subprocess.run(
        ["bash", "-c", f"{prelude}\n{recorders}\nexec() {{ :; }}\n{body}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def case_arm(command: str) -> str:
    """The body of ``command)`` in the script's ``case``, without the commands it runs last."""
    script = (ROOT / "dev").read_text()
    arm = re.search(rf"\n  {command}\)\n(.*?)\n    ;;", script, re.S)
    assert arm is not None, command
    return "\n".join(line for line in arm.group(1).splitlines() if "ensure_" in line or line.strip() == "setup")


def test_demo_and_setup_do_not_install_faketime():
    for command in ("demo", "setup"):
        assert "ensure_faketime" not in called(case_arm(command)), command
        assert "ensure_venv" in called(case_arm(command))


def test_the_test_command_installs_faketime_for_the_clock_step_faults():
    assert "ensure_faketime" in called(case_arm("test"))


def test_the_gate_and_check_need_node_for_the_ui_and_demo_does_not():
    """The UI's checks (scripts/build_ui --check) never skip in ``test`` or ``check``: both ensure
    Node.js first; ``demo`` and ``setup`` need none."""
    for command in ("test", "check"):
        assert "ensure_node" in called(case_arm(command)), command
    for command in ("demo", "setup"):
        assert "ensure_node" not in called(case_arm(command)), command


def test_a_stage_run_beside_the_next_is_recorded_with_its_exit_and_output():
    """mypy, the docs and the UI run beside the fast tier in the gate: a failure among them still
    fails the summary, with its own output printed once, after the stage it ran beside."""
    script = (ROOT / "dev").read_text()
    prelude = script.split("\ncmd=${1:-help}", 1)[0]
    body = (
        "beside ok bash -c 'echo said-by-ok'\n"
        "beside bad bash -c 'echo said-by-bad; exit 3'\n"
        "stage next true\n"
        "joined\n"
        'for i in "${!stage_names[@]}"; do echo "${stage_names[$i]}=${stage_results[$i]}"; done\n'
    )
    done = subprocess.run(["bash", "-c", f"{prelude}\n{body}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines.count("said-by-ok") == 1 and lines.count("said-by-bad") == 1
    results = [line for line in lines if "=" in line]
    assert [r.split("=")[0] for r in results] == ["next", "ok", "bad"]
    assert results[1].startswith("ok=ok in ") and results[2].startswith("bad=FAILED (exit 3) in ")
