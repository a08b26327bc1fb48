"""Result documents: where a clean job's full result lives when Redis keeps only its reference.

With ``[jrs] result_documents`` set, the cleanup's commit writes the entry's full result (its
schema-2 JSON, clean) to a document first, then replaces the dirty entry by a 40-B reference
(:mod:`.reference`): Flink's job graphs work the same way (FLINK-2354: the graph in a state
backend, a handle in ZooKeeper). The store imports nothing of Airflow, so it sees documents
through the small :class:`ResultDocuments` interface; :class:`FolderDocuments` is the stdlib
one (a local or mounted folder). An object store (``s3://``, ``gs://``) is not built yet.

A document is named by its job, its fence and its creation time, and never rewritten: a
history item that keeps a reference still finds its own document after the job ran again.
The folder itself is never created: on a host where the shared folder is not mounted, a
cleanup fails (the entry stays dirty) instead of committing a result to that host's own disk.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, unquote, urlsplit

from airflow_jrs.domain.model import JobResultEntry
from airflow_jrs.exceptions import JrsConfigError, ResultDocumentError
from airflow_jrs.store.results.reference import document_name
from airflow_jrs.store.results.serde import EntryDecodeError, decode_document, encode_document


class ResultDocuments(Protocol):
    """Immutable documents by (namespace, job id, name) (``name``: :func:`.reference.document_name`).

    ``put`` of bytes already there is a no-op (a retried cleanup); of other bytes it raises
    ``FileExistsError`` (a document is never overwritten). ``get`` raises ``FileNotFoundError``
    when the document is missing, and only then: storage this host cannot reach (a folder not
    mounted) is another ``OSError``, so that nobody is told to forget a result that exists."""

    def location(self, namespace: str, job_id: str, name: str) -> str: ...
    def put(self, namespace: str, job_id: str, name: str, data: bytes) -> None: ...
    def get(self, namespace: str, job_id: str, name: str) -> bytes: ...
    def delete(self, namespace: str, job_id: str, name: str) -> None: ...


class FolderDocuments:
    """Documents as files: ``<root>/<namespace>/<job id, percent-quoted>/<name>.json``.

    A job id may hold ``/`` and other characters a path must not: it is quoted whole. A write
    goes to a temporary file in the same folder, is flushed to disk, then renamed into place
    (``os.replace``), so a reader sees a whole document or none, also after a crash. ``root``
    must exist (a mount point): it is never created, see :meth:`_reachable`."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"FolderDocuments({str(self.root)!r})"

    @classmethod
    def from_setting(cls, value: str) -> FolderDocuments:
        """The documents of ``[jrs] result_documents``: a folder path or a ``file://`` URL."""
        text = value.strip()
        parts = urlsplit(text)
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise JrsConfigError(f"[jrs] result_documents {value!r}: a file:// URL names no host; use file:///path")
            text = unquote(parts.path)
        elif parts.scheme and len(parts.scheme) > 1:  # "C:\..." is a path, "s3://..." is not
            raise JrsConfigError(
                f"[jrs] result_documents {value!r}: only a folder path or a file:// URL is supported yet; "
                "mount the bucket as a folder, or leave the setting empty to keep full results in Redis."
            )
        if not text or not os.path.isabs(text):
            raise JrsConfigError(f"[jrs] result_documents {value!r} must be an absolute folder path or file:// URL")
        return cls(text)

    def _path(self, namespace: str, job_id: str, name: str) -> Path:
        return self.root / quote(namespace, safe="") / quote(job_id, safe="") / f"{quote(name, safe='')}.json"

    def location(self, namespace: str, job_id: str, name: str) -> str:
        return str(self._path(namespace, job_id, name))

    def _reachable(self) -> None:
        """Raise :class:`FolderNotReachable` unless ``root`` is a folder on this host. Creating it
        would hide a mount that failed: the cleanup would commit a reference to a document on
        this host's own (perhaps ephemeral) disk, that every other host reports missing."""
        if not self.root.is_dir():
            raise FolderNotReachable(
                f"the folder {self.root} ([jrs] result_documents) does not exist on this host; it is never "
                "created here: mount the folder every worker, the UI and the CLI share at that path "
                "(or fix the setting)"
            )

    def put(self, namespace: str, job_id: str, name: str, data: bytes) -> None:
        """Write the document once; then make every name on its path durable (the document in
        its job's folder, that folder in the namespace's, that one in ``root``), also when the
        same bytes are there already: a cleanup killed after the rename and before the fsync
        retries through here, and the reference it then writes must never outlive the file."""
        self._reachable()
        path = self._path(namespace, job_id, name)
        if path.exists():
            if path.read_bytes() != data:
                raise FileExistsError(f"{path} exists with other content; result documents are never overwritten")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        for folder in (path.parent, path.parent.parent, self.root):
            _fsync_dir(folder)

    def get(self, namespace: str, job_id: str, name: str) -> bytes:
        self._reachable()
        return self._path(namespace, job_id, name).read_bytes()

    def delete(self, namespace: str, job_id: str, name: str) -> None:
        path = self._path(namespace, job_id, name)
        path.unlink(missing_ok=True)
        try:
            path.parent.rmdir()  # the job's folder, once its last document is gone
        except OSError:
            pass


class FolderNotReachable(OSError):
    """The documents' folder is not there on this host (not mounted): not a missing document."""


def _fsync_dir(folder: Path) -> None:
    """Make the names in ``folder`` durable (a rename, a new folder): the reference written next
    must never outlive them."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # a platform without directory handles
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_document(documents: ResultDocuments, namespace: str, entry: JobResultEntry) -> str:
    """Write the result document of ``entry`` (a dirty entry about to be committed as a
    reference); returns where. Raises :class:`ResultDocumentError`: the caller then leaves the
    entry dirty, and the cleanup's retry writes the document again."""
    name = document_name(entry)
    where = documents.location(namespace, entry.job_id, name)
    try:
        documents.put(namespace, entry.job_id, name, encode_document(entry))
    except OSError as exc:
        raise ResultDocumentError(
            f"could not write the result document of job {entry.job_id!r} to {where} ({exc}); the entry "
            "stays dirty and a retry of the cleanup writes it again. Check that this host can write "
            "[jrs] result_documents.",
            job_id=entry.job_id,
            namespace=namespace,
            location=where,
        ) from exc
    return where


def read_document(documents: ResultDocuments | None, namespace: str, summary: JobResultEntry) -> JobResultEntry:
    """The full entry a summary (a clean reference) stands for, read from its document.

    Raises :class:`ResultDocumentError` naming where the document should be and what to do; a
    missing or foreign document is never shown as some other result, and nothing is changed."""
    job_id, fence = summary.job_id, summary.result.fence
    if documents is None:
        raise ResultDocumentError(
            f"job {job_id!r} (fence {fence}) is committed as a reference: its full result is in a result "
            "document, and this store has no [jrs] result_documents. Set it (AIRFLOW__JRS__RESULT_DOCUMENTS) "
            "to the folder the cleanup writes to.",
            job_id=job_id,
            namespace=namespace,
            location="",
        )
    name = document_name(summary)
    where = documents.location(namespace, job_id, name)
    fix = f"Restore it from a backup, or `airflow-jrs forget {job_id}` so that the job runs again; the entry is kept."
    try:
        raw = documents.get(namespace, job_id, name)
    except FileNotFoundError:
        raise ResultDocumentError(
            f"the result document of job {job_id!r} (fence {fence}) is missing at {where}. If this host's "
            f"[jrs] result_documents is not the shared folder the cleanups write to, mount that one here. {fix}",
            job_id=job_id,
            namespace=namespace,
            location=where,
        ) from None
    except OSError as exc:
        raise ResultDocumentError(
            f"could not read the result document of job {job_id!r} at {where} ({exc}). Check that this host "
            "can read [jrs] result_documents; the entry is kept.",
            job_id=job_id,
            namespace=namespace,
            location=where,
        ) from exc
    try:
        return decode_document(raw, summary)
    except EntryDecodeError as exc:
        raise ResultDocumentError(
            f"the result document at {where} is not the result of job {job_id!r} fence {fence} ({exc.reason}); "
            f"it was left as it is. {fix}",
            job_id=job_id,
            namespace=namespace,
            location=where,
        ) from None
