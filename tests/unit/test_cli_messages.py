"""Small lies and noise in the CLI's words, against a real Redis.

* the password is masked where it stands as a credential, not wherever its word appears;
* with ``[jrs] result_documents`` on and the folder not given, ``list`` and ``show`` both say the
  folder is needed (``--result-documents``);
* a ``--json`` command's error is one JSON object on stdout, with the same exit code;
* counts read "1 job", "2 jobs".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_jrs.cli import main
from airflow_jrs.cli.common import plural
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.diagnosis import mask_password
from airflow_jrs.store.results.documents import FolderDocuments
from jrs_testbench.redis_server import EmbeddedRedis
from jrs_testbench.secure_redis import require_password

JOB = "d.t.2013-01-01"


@pytest.fixture
def base(redis_url, namespace, monkeypatch):
    monkeypatch.delenv("AIRFLOW__JRS__RESULT_DOCUMENTS", raising=False)
    return ["--redis-url", redis_url, "--namespace", namespace]


# -- the password masker -------------------------------------------------------------------------
@pytest.mark.parametrize("password", ["wrong", "password", "or"])
def test_a_wrong_password_that_is_an_ordinary_word_leaves_the_advice_readable(tmp_path, capsys, password):
    with EmbeddedRedis(tmp_path) as server:
        require_password(server.port, "the-right-one")
        url = f"redis://:{password}@127.0.0.1:{server.port}/0"
        assert main(["--redis-url", url, "--namespace", "n", "list"]) == 3
    err = capsys.readouterr().err
    assert "needs a password (or the user or password is wrong)" in err, err
    assert "***" not in err and "the-right-one" not in err


@pytest.mark.parametrize("password", ["wrong", "password", "or", "s3cr:t"])
def test_the_password_is_masked_where_it_stands_as_a_credential(password):
    text = (
        f"redis://:{password}@h:6379/0 redis://user:{password}@h/0 ?password={password}&db=0 "
        f"password: '{password}' (or the user or password is wrong)"
    )
    assert mask_password(text, password) == (
        "redis://:***@h:6379/0 redis://user:***@h/0 ?password=***&db=0 "
        "password: '***' (or the user or password is wrong)"
    )


@pytest.mark.parametrize(
    "text",
    ['{"password": "s3cret"}', "{'password': 's3cret'}", "password: s3cret.", "AUTH failed: pwd=s3cret)"],
)
def test_a_quoted_key_or_a_sentence_end_does_not_let_the_password_through(text):
    # An exception's repr of a dict quotes the key, and a sentence ends the value with a period:
    # both are credentials the UI's error text (plugins/api.py) must not show.
    masked = mask_password(text, "s3cret")
    assert "s3cret" not in masked and "***" in masked, masked


# -- result documents ----------------------------------------------------------------------------
@pytest.fixture
def referenced(redis_url, namespace, tmp_path):
    """A clean job committed as a reference: its run is named only in its result document."""
    folder = tmp_path / "documents"
    folder.mkdir()
    store = RedisJobResultStore(redis_url, namespace, result_documents=FolderDocuments(folder))
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, attempt=Attempt("d", "t", "r1", 1)))
    store.mark_result_as_clean(JOB, expected=store.get_entry(JOB))
    assert store.get_entry(JOB).summary
    return str(folder)


def test_list_and_show_both_say_the_result_documents_folder_is_needed(base, referenced, capsys):
    assert main([*base, "list"]) == 0
    captured = capsys.readouterr()
    assert "--result-documents" in captured.out + captured.err, captured
    assert main([*base, "show", JOB]) == 2
    assert "--result-documents" in capsys.readouterr().err

    with_folder = [*base, "--result-documents", referenced]
    assert main([*with_folder, "show", JOB]) == 0
    assert "d/t r1" in capsys.readouterr().out
    assert main([*with_folder, "list"]) == 0
    captured = capsys.readouterr()
    assert "--result-documents" not in captured.out + captured.err


# -- --json errors -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["show", "d.nope.2013-01-01"], 1),  # not found: the answer itself, not an error
        (["mark-clean", "--yes", "d.nope.2013-01-01"], 1),
        (["forget", "--yes"], 2),
        (["recompute", "--yes", "--airflow-url", "http://127.0.0.1:9", JOB], 2),
        (["list", "--limit", "0"], 2),  # a bad argument
    ],
)
def test_a_json_command_prints_its_error_as_one_json_object_on_stdout(base, store, capsys, args, code):
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, attempt=Attempt("d", "t", "r1", 1)))
    assert main([*base, "--json", *args]) == code
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    if "error" in doc:
        assert doc["error"]["exit_code"] == code and doc["error"]["message"], doc
        assert captured.err == ""
    else:
        assert args[0] == "show" and doc["entry"] is None


def test_a_json_command_with_the_store_unreachable_prints_a_json_error_and_exits_3(tmp_path, capsys):
    from jrs_testbench.helpers import free_port

    url = f"redis://127.0.0.1:{free_port()}/0?socket_connect_timeout=0.5"
    assert main(["--redis-url", url, "--namespace", "n", "--json", "dirty"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"]["exit_code"] == 3 and "nothing listens" in doc["error"]["message"]


# -- plurals -------------------------------------------------------------------------------------
def test_counts_read_as_one_job_and_two_jobs():
    assert (plural(1, "job"), plural(2, "job"), plural(0, "job")) == ("1 job", "2 jobs", "0 jobs")
    assert plural(1, "contiguous range") == "1 contiguous range" and plural(3, "entry", "entries") == "3 entries"


def test_forget_previews_one_result_in_the_singular(base, store, capsys):
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED))
    assert main([*base, "forget", "--dry-run", JOB]) == 0
    out = capsys.readouterr().out
    assert "Will forget 1 result " in out and "1 results" not in out


def test_no_cli_f_string_counts_a_plural_noun_without_plural():
    """Every ``{len(x)} nouns`` / ``{count} nouns`` in the CLI goes through ``plural``."""
    import re

    root = Path(__file__).parents[2] / "airflow_jrs" / "cli"
    bad = re.compile(r"\{(len\([^}]*\)|[a-z_]+|summary\[[^]]+\])\} (jobs|results|backfills|dates|ranges|contiguous)\b")
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(root.glob("*.py"))
        if path.name not in ("plan.py", "reads.py")  # owned elsewhere; see the report
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if bad.search(line)
    ]
    assert found == []
