"""Memory budgets of a worker process: large-body slots and the parse-tree byte budget."""

from __future__ import annotations

import threading
import time

from crawler_tasks.core.memory import ByteAllowance, LargeBodies


def in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_permit_waits_while_every_large_body_slot_is_held_and_gets_the_first_one_freed():
    bodies = LargeBodies(2)
    first, second, third = bodies.permit(), bodies.permit(), bodies.permit()
    first.take()
    second.take()
    waiting = in_thread(third.take)
    time.sleep(0.3)
    assert waiting.is_alive() and not third.held
    second.release()
    waiting.join(timeout=2)
    assert third.held and not waiting.is_alive()


def test_a_permit_takes_one_slot_however_often_it_asks_and_gives_it_back_once():
    bodies = LargeBodies(1)
    with bodies.permit() as permit:
        assert permit.take()
        assert permit.take() and bodies.free == 0  # already held: no second slot
    permit.release()  # again: nothing more to give back
    assert bodies.free == 1
    other = bodies.permit()
    assert other.take() and other.held  # the slot is free again


def test_a_permit_waits_a_bounded_time_then_says_none_came_free():
    bodies = LargeBodies(1, wait_s=0.2)
    first = bodies.permit()
    assert first.take()
    started = time.monotonic()
    late = bodies.permit()
    assert not late.take() and not late.held
    assert 0.15 < time.monotonic() - started < 2
    late.release()  # nothing taken, nothing given back
    first.release()
    assert bodies.free == 1


def test_a_tree_that_waited_its_bound_goes_ahead_over_the_budget():
    budget = ByteAllowance(100, wait_s=0.2)
    with budget.hold(100):
        started = time.monotonic()
        with budget.hold(50):
            assert budget.used == 150
        assert time.monotonic() - started < 2
    assert budget.used == 0


def test_a_byte_budget_holds_requests_until_they_fit_and_lets_an_oversized_one_run_alone():
    budget = ByteAllowance(100)
    order: list[str] = []
    release_small = threading.Event()

    def small() -> None:
        with budget.hold(60):
            order.append("small")
            release_small.wait(2)

    def big() -> None:
        with budget.hold(1000):  # above the capacity: waits to be alone
            order.append("big")

    holder = in_thread(small)
    time.sleep(0.1)
    waiter = in_thread(big)
    time.sleep(0.3)
    assert order == ["small"] and budget.used == 60
    release_small.set()
    holder.join(2), waiter.join(2)
    assert order == ["small", "big"] and budget.used == 0
