"""CancelToken and the context's current token."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.errors import RunCancelledError, RunFailure
from pipeline.run.cancellation import CancelToken, bind, current_token, raise_if_cancelled


def test_token__first_reason_wins_and_it_stays_set() -> None:
    token = CancelToken()
    assert not token.cancelled and token.reason is None and not token.wait(0)
    assert token.cancel("run cancelled") is True
    assert token.cancel("lease lost") is False
    assert token.cancelled and token.reason == "run cancelled" and token.wait(0)


def test_token__raise_if_cancelled_is_a_run_failure_with_the_reason() -> None:
    token = CancelToken()
    token.raise_if_cancelled("verifier")
    token.cancel("run cancelled")
    with pytest.raises(RunCancelledError, match="verifier was cancelled: run cancelled") as exc:
        token.raise_if_cancelled("verifier")
    assert isinstance(exc.value, RunFailure)


def test_token__callbacks_run_once_and_can_be_forgotten() -> None:
    token = CancelToken()
    calls: list[str] = []
    token.on_cancel(lambda: calls.append("a"))
    forget = token.on_cancel(lambda: calls.append("b"))
    forget()
    token.cancel("stop")
    token.cancel("again")
    token.on_cancel(lambda: calls.append("late"))  # already set: at once
    assert calls == ["a", "late"]


def test_token__wakes_a_waiting_thread() -> None:
    token = CancelToken()
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(token.wait, 5.0)
        token.cancel("stop")
        assert waiting.result(timeout=1.0) is True


def test_bind__current_token_inside_the_block_only_and_nested() -> None:
    outer, inner = CancelToken(), CancelToken()
    assert current_token() is None
    with bind(outer):
        assert current_token() is outer
        with bind(inner):
            assert current_token() is inner
        with bind(None):
            assert current_token() is None
        assert current_token() is outer
    assert current_token() is None


def test_bind__per_thread_a_token_never_leaks_into_another_thread() -> None:
    seen: list[CancelToken | None] = []
    token = CancelToken()
    with bind(token):
        thread = threading.Thread(target=lambda: seen.append(current_token()))
        thread.start()
        thread.join()
    assert seen == [None]


def test_raise_if_cancelled__uses_the_bound_token_and_nothing_without_one() -> None:
    raise_if_cancelled()
    token = CancelToken()
    token.cancel("run cancelled")
    with bind(token), pytest.raises(RunCancelledError):
        raise_if_cancelled("composer")
