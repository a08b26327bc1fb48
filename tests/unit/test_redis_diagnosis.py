"""The words users read for each Redis failure: never the server's text as is, always what to do.

The cases that need a real server (refused, timeout, password, replica, OOM, DNS, ACL) are also
run end to end in test_store_unavailable.py and test_tls_acl.py; this file pins the table,
including LOADING, which a test cannot make a real server show on demand.
"""

from __future__ import annotations

import socket

import pytest
import redis
from redis._parsers.base import BaseParser

from airflow_jrs.exceptions import StoreUnavailableError
from airflow_jrs.store.redis.diagnosis import diagnose
from airflow_jrs.store.redis.errors import redis_errors

CONN, SERVER = "connection 'jrs_default'", "redis.internal:6380"


def server_error(reply: str) -> Exception:
    """The exception redis-py raises for this error reply (as its parser maps it)."""
    return BaseParser.parse_error(reply)


def chained(outer: Exception, inner: BaseException) -> Exception:
    try:
        try:
            raise inner
        except BaseException:
            raise outer  # noqa: B904 - redis-py chains the socket error as __context__, like this
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "kind", "retryable", "words"),
    [
        (server_error("NOAUTH Authentication required."), "auth", False, ["needs a password", CONN]),
        (server_error("WRONGPASS invalid username-password pair or user is disabled."), "auth", False,
         ["needs a password", "set the ACL user and password in connection 'jrs_default'"]),
        (redis.exceptions.ResponseError("HELLO must be called with the client already authenticated, otherwise the "
                                        "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the "
                                        "client and select the RESP protocol version at the same time"),
         "auth", False, ["needs a password"]),
        (server_error("NOPERM this user has no permissions to access one of the keys used as arguments"), "noperm",
         False, ["lacks a permission", "docs/security.md"]),
        (server_error("READONLY You can't write against a read only replica."), "readonly", True,
         ["read-only replica", "point connection 'jrs_default' at the primary"]),
        (redis.exceptions.ResponseError("Error running script (call to f_1): @user_script:10: @user_script: 10: "
                                        "-READONLY You can't write against a read only replica."),
         "readonly", True, ["read-only replica"]),
        (server_error("OOM command not allowed when used memory > 'maxmemory'."), "oom", True,
         ["out of memory (maxmemory with noeviction)", "will retry"]),
        (server_error("LOADING Redis is loading the dataset in memory"), "loading", True,
         ["loading its data after a restart", "Airflow will retry"]),
        (chained(redis.exceptions.ConnectionError("Error 111 connecting to redis.internal:6380. Connection refused."),
                 ConnectionRefusedError(111, "Connection refused")), "refused", True,
         ["nothing listens at redis.internal:6380", "fix the host and port of connection 'jrs_default'"]),
        (chained(redis.exceptions.ConnectionError("Error -2 connecting to x.invalid:6379. Name or service not known."),
                 socket.gaierror(-2, "Name or service not known")), "dns", True, ["does not resolve"]),
        (redis.exceptions.TimeoutError("Timeout reading from redis.internal:6380"), "timeout", True,
         ["did not answer in time", "read_timeout"]),
        (redis.exceptions.ResponseError("ERR something new.."), "other", False, ['"ERR something new"', "report it"]),
    ],
)  # fmt: skip
def test_each_failure_is_said_in_our_words_with_what_to_do(exc, kind, retryable, words):
    problem = diagnose(exc, conn=CONN, server=SERVER)
    assert (problem.kind, problem.retryable) == (kind, retryable)
    sentence = problem.sentence()
    for word in words:
        assert word in sentence, sentence
    assert sentence.endswith(".") and ".." not in sentence and "\n" not in sentence
    if kind != "other":  # the server's own text is never shown as is
        assert str(exc) not in sentence


def test_the_store_boundary_keeps_the_case_and_whether_to_retry():
    with pytest.raises(StoreUnavailableError) as info, redis_errors("read the result of job 'j'", "prod", "j"):
        raise server_error("LOADING Redis is loading the dataset in memory")
    exc = info.value
    assert (exc.kind, exc.retryable, exc.what, exc.job_id) == ("loading", True, "read the result of job 'j'", "j")
    assert str(exc) == (
        "job result store (namespace 'prod') could not read the result of job 'j': Redis is loading its data "
        "after a restart; Airflow will retry once it has loaded."
    )
