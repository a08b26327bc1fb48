"""A fence's ``==`` is its identity: the token and the owner nonce (airflow_jrs/spark/fence.py).

A failover that lost the fence counter's INCR hands token 7 to two attempts, A (nonce a1..) and
B (nonce c3..). Before, ``Fence`` compared as the integer, so ``A == B`` was true and every check
of "is this the same holder?" had to remember a helper; one that forgot let A act for B. Now
``==`` tells them apart, a bare 7 (a stored result, an older lease, a person) equals only a
fence without a nonce, hashes agree with ``==`` so sets and dicts stay consistent, and order,
display and JSON stay the token's.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import pickle
from datetime import UTC, datetime

import pytest

from airflow_jrs.domain.model import EntryState, JobResult, JobResultEntry, JobStatus
from airflow_jrs.spark import fence as spark_fence
from airflow_jrs.spark.fence import Fence
from airflow_jrs.store.leases import fence as store_fence
from airflow_jrs.store.leases.fence import fence_arg
from airflow_jrs.store.results.reference import encode_reference
from airflow_jrs.store.results.serde import EntryDecodeError, decode_document, decode_entry, encode_document

A = Fence(7, "a1" * 8)  # the first holder of token 7
B = Fence(7, "c3" * 8)  # the second, after a failover that lost the INCR
#: Fences and plain tokens of every kind: with a nonce, without one, plain, another token.
SAMPLES: list[int] = [A, B, Fence(7, "a1" * 8), Fence(7), 7, Fence(8, "a1" * 8), Fence(8), 8, 0, Fence(0)]


def test_two_holders_of_one_token_are_unequal_both_ways() -> None:
    assert A != B and B != A and not A == B and not B == A
    assert A == Fence(7, "a1" * 8) and not A != Fence(7, "a1" * 8)
    assert int(A) == int(B) == 7  # the token alone is one; ask for it by name


def test_a_plain_token_equals_only_a_fence_without_a_nonce() -> None:
    assert Fence(7) == 7 and 7 == Fence(7) and not Fence(7) != 7 and not 7 != Fence(7)
    assert A != 7 and 7 != A and not A == 7 and not 7 == A  # a bare 7 cannot say which holder
    assert A != Fence(7) and Fence(7) != A
    assert Fence(8) != 7 and 7 != Fence(8)


def test_equality_is_the_scripts_identity_and_hashes_agree() -> None:
    for a, b in itertools.product(SAMPLES, repeat=2):
        assert (a == b) is (fence_arg(a) == fence_arg(b)), (fence_arg(a), fence_arg(b))
        assert (a != b) is not (a == b), (fence_arg(a), fence_arg(b))
        if a == b:
            assert hash(a) == hash(b), (fence_arg(a), fence_arg(b))


def test_sets_and_dicts_keep_two_holders_apart_and_a_token_with_its_nonceless_fence() -> None:
    assert len({A, B}) == 2 and len({A, Fence(7, "a1" * 8)}) == 1 and len({Fence(7), 7}) == 1
    assert A in {A} and B not in {A} and 7 not in {A} and A not in {7} and Fence(7) in {7}
    # the union does not depend on the order: no element stands in for another holder
    assert {7} | {A} | {B} == {B} | {A} | {7} and len({7} | {A} | {B}) == 3
    by_fence = {A: "a", B: "b", 7: "bare"}
    assert (by_fence[A], by_fence[B], by_fence[7], by_fence[Fence(7)]) == ("a", "b", "bare", "bare")
    assert Fence(7, "d4" * 8) not in by_fence


def test_order_arithmetic_and_display_stay_the_tokens() -> None:
    newer = Fence(8, "c3" * 8)
    assert newer > A and A < newer and A <= B and A >= B and max(A, newer, 6) is newer
    assert sorted([newer, 6, A]) == [6, A, newer]
    assert type(A + 1) is int and A + 1 == 8
    assert (str(A), repr(A), f"{A}", f"{A:03d}") == ("7", "7", "7", "007")  # logs, messages, redis-py
    assert json.dumps({"fence": A}) == '{"fence": 7}'


def test_anything_but_an_integer_is_not_a_fence() -> None:
    assert A != "7" and A != "7:" + "a1" * 8 and A is not None and A != None  # noqa: E711
    assert Fence(7) != "7" and Fence(7) != None  # noqa: E711


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_pickled_fence_keeps_its_nonce_and_its_equality(protocol: int) -> None:
    back = pickle.loads(pickle.dumps(A, protocol))
    assert type(back) is Fence and back.nonce == A.nonce and back == A and back != B


def test_copies_keep_the_nonce_so_a_copied_record_names_the_same_holder() -> None:
    @dataclasses.dataclass(frozen=True)
    class Named:
        fence: int

    assert copy.copy(A) == A and copy.deepcopy(A) == A and copy.deepcopy(A) != B
    assert dataclasses.asdict(Named(A))["fence"] == A  # asdict deep-copies its fields
    assert Named(A) != Named(B) and Named(A) == Named(copy.deepcopy(A))


def test_there_is_one_definition_and_no_helper_beside_it() -> None:
    assert store_fence.Fence is spark_fence.Fence and store_fence.nonce_of is spark_fence.nonce_of
    assert not hasattr(store_fence, "same_fence")  # plain == is the identity now


def _committed(fence: int) -> JobResultEntry:
    result = JobResult(job_id="j", status=JobStatus.SUCCEEDED, fingerprint="ab" * 32, fence=fence)
    return JobResultEntry(result=result, state=EntryState.CLEAN, created_at=datetime(2013, 1, 1, tzinfo=UTC))


def _summary(entry: JobResultEntry) -> JobResultEntry:
    reference = encode_reference(entry)
    assert reference is not None
    return decode_entry(reference, "j")


def test_a_result_document_and_its_reference_compare_stored_tokens() -> None:
    # serde's decode_document compares the fences of two stored results: a result stores the token
    # only, so both sides are plain integers, whatever fence the writer held
    written = _committed(A)  # as if a nonce had reached the result: it is not stored
    summary = _summary(written)
    document = decode_document(encode_document(written), summary)
    assert type(summary.result.fence) is int and type(document.result.fence) is int
    assert document.result.fence == summary.result.fence == 7
    assert decode_document(encode_document(_committed(B)), summary).result.fence == 7  # the token's document


def test_a_result_document_of_another_fence_is_refused() -> None:
    with pytest.raises(EntryDecodeError, match="the document is the result of fence 8"):
        decode_document(encode_document(_committed(Fence(8, "a1" * 8))), _summary(_committed(A)))
