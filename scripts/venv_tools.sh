# Sourced by ./dev and scripts/older_airflow: how a virtualenv gets its packages.
#
# uv, pinned here, installs a lock's ~190 packages in parallel from its cache (~/.cache/uv):
# pip took 2-10 minutes a venv on 2 cores (5.5 min for .venv and 9 min for an older minor's under
# load), which the gate paid once per Airflow minor. uv itself comes from PyPI through the venv's
# own pip, so nothing is installed outside the project's venvs. uv reads no pip configuration:
# it installs from PyPI (UV_INDEX_URL names another index).
UV_VERSION=0.13.9

# pip_q VENV ARGS...: `pip install ARGS` into VENV, quietly. Some machines' pip config names local
# index folders that do not exist, and pip warns about each for every package; keep every other message.
pip_q() { "$1/bin/pip" install -q --disable-pip-version-check "${@:2}" 2> >(grep -v "^WARNING: Location '" >&2); }

# ensure_uv VENV: VENV/bin/uv at UV_VERSION.
ensure_uv() {
  local venv=$1
  if [ "$("$venv/bin/uv" --version 2>/dev/null | cut -d' ' -f2)" = "$UV_VERSION" ]; then return 0; fi
  pip_q "$venv" "uv==$UV_VERSION"
}

# uv_install VENV ARGS...: `uv pip install ARGS` into VENV, bytecode compiled as pip does (the
# first import of Airflow in each test process would otherwise compile it).
uv_install() {
  local venv=$1
  shift
  ensure_uv "$venv"
  "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" --compile-bytecode "$@"
}

# install_project VENV: the project itself, editable and without dependencies (the lock has them).
install_project() {
  uv_install "$1" --no-deps -e . 2>&1 | grep -vE "BuildBackendWarning|^ |^$" || true
  # The editable build may leave airflow_jrs.egg-info in the repository root: with the root on
  # sys.path (the DAGs' PYTHONPATH) Airflow would find the plugin's entry point twice and log
  # "Plugin 'airflow_jrs' already registered" in every process. The venv's dist-info suffices.
  rm -rf airflow_jrs.egg-info
}

# ensure_pyspark_jars VENV VERSION: pyspark-client (a Spark provider dependency) installs its own
# pyspark/ files, without the jars, over pyspark's: make sure the Python side matches the jars
# that spark-submit runs.
ensure_pyspark_jars() {
  local venv=$1 version=$2
  if "$venv/bin/python" - "$version" <<'PYEOF'
import pathlib, sys
import pyspark
jars = pathlib.Path(pyspark.__file__).parent / "jars"
ok = pyspark.__version__ == sys.argv[1] and (jars / f"spark-core_2.13-{sys.argv[1]}.jar").exists()
sys.exit(0 if ok else 1)
PYEOF
  then return 0; fi
  printf '\033[1m[%s]\033[0m %s\n' "$(basename "$0")" "installing pyspark==$version over pyspark-client's files" >&2
  uv_install "$venv" --reinstall --no-deps "pyspark==$version"
}
