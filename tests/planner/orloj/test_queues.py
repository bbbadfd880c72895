import math

from adaserve.planner.orloj.queues import Group, Run, SizeQueues
from adaserve.planner.orloj.score import ScoreSegments
from adaserve.planner.orloj.tables import TableEntry

# three sizes whose estimates are 1, 2 and 4 s; one segment each (no break), a = beta = 1
GROUP: Group = ([TableEntry(est, lambda: ScoreSegments((), (1.0,), (1.0,))) for est in (1.0, 2.0, 4.0)], (1.0, 2.0, 4.0))


def _run(q: SizeQueues, key: int, top: int, deadline: float = 10.0, n: int = 1, name: str = "x") -> Run:
    run = Run([f"{name}{j}" for j in range(n)], key, GROUP, deadline, 1.0, 1.0, top)
    q.add(run)
    return run


def test_nested_membership_counts_and_release() -> None:
    q = SizeQueues(3)
    runs = [_run(q, k, top) for k, top in enumerate([2, 2, 1, 0, 0])]
    assert [q.members(i) for i in range(3)] == [5, 3, 2]
    q.lower(runs[0], 0)  # leaves the queues of sizes 1 and 2
    assert [q.members(i) for i in range(3)] == [5, 2, 1]
    assert runs[0] not in set(q.queue(1)) and runs[0] in set(q.queue(0))
    assert q.release(runs[1]) == ["x0"]
    assert len(q) == 4 and [q.members(i) for i in range(3)] == [4, 1, 0] and runs[1].top == -1
    assert set(q.queue(1)) == {runs[2]}


def test_a_run_is_due_to_leave_its_size_when_its_deadline_no_longer_allows_it() -> None:
    q = SizeQueues(3)
    a = _run(q, 0, 2, deadline=10.0)  # leaves size index 2 after 6 s (10 - 4)
    b = _run(q, 1, 1, deadline=5.0)  # leaves size index 1 after 3 s (5 - 2)
    assert q.next_drop() == 3.0
    assert list(q.due(3.0)) == []  # not yet: strictly before now
    assert list(q.due(3.5)) == [b]
    q.lower(b, 0)  # pushed again, due after 4 s
    assert list(q.due(5.0)) == [b]
    q.release(b)
    q.lower(a, 1)  # its old entry (6 s) is stale now, the new one is 8 s
    assert list(q.due(7.0)) == [] and list(q.due(9.0)) == [a]
    assert q.next_drop() == math.inf


def test_release_queue_empties_the_queue_of_a_size_and_keeps_the_others() -> None:
    q = SizeQueues(3)
    a, b, c = _run(q, 0, 2, n=2, name="a"), _run(q, 1, 1, name="b"), _run(q, 2, 0, n=3, name="c")
    got, runs = q.release_queue(1)
    assert sorted(got) == ["a0", "a1", "b0"] and set(runs) == {a, b}
    assert len(q) == 3 and q.count == [3, 0, 0] and a.top == b.top == -1 and c.top == 0
    assert list(q.due(100.0)) == [c]  # the released runs' entries are stale


def test_the_heap_of_drops_keeps_entries_of_live_runs_only() -> None:
    # Released or lowered runs leave their entries until their time comes: with long deadlines the
    # heap would grow by every job of the last minute.
    q = SizeQueues(3)
    live = []
    for k in range(20_000):
        run = _run(q, k, 2, deadline=60.0 + k)
        if k % 100 == 0:
            live.append(run)
            q.lower(run, 1)
        else:
            q.release(run)
    assert len(q._drops) < 1_000
    assert list(q.due(math.inf)) == sorted(live, key=lambda r: r.drop_at)


def test_take_splits_the_last_run_and_leaves_the_rest_filed() -> None:
    q = SizeQueues(2)
    a, b, c = (_run(q, k, 1, n=n, name=name) for k, (n, name) in enumerate([(2, "a"), (3, "b"), (4, "c")]))
    got, used = q.take([b, a, c], 4)
    assert got == ["b0", "b1", "b2", "a0"] and used == 2
    assert a.items == ["a1"] and a.n == 1 and a.top == 1
    assert len(q) == 5 and q.count == [0, 5] and b.top == -1
    got, used = q.take([a, c], 5)  # whole runs only
    assert got == ["a1", "c0", "c1", "c2", "c3"] and used == 2 and len(q) == 0


def test_rebase_scales_decay_and_the_cached_alphas() -> None:
    q = SizeQueues(3)
    run = _run(q, 0, 2)
    run.coef[1] = [2.0, 5.0, 7.0]
    q.rebase(3.0)
    assert run.decay == 3.0 and run.coef[1] == [6.0, 5.0, 7.0] and run.coef[0] is None


def test_the_mirror_ranks_by_score_ties_to_the_earlier_filed_and_only_the_queue_s_runs() -> None:
    q = SizeQueues(3)
    q.ATTACH, q.DETACH = 2, 2
    runs = [_run(q, key, top) for key, top in [(5, 2), (1, 2), (3, 1), (2, 2), (4, 0)]]
    for run, (a, b) in zip(runs, [(1.0, 0.0), (0.0, 1.0), (0.0, 9.0), (0.0, 1.0), (0.0, 9.0)]):
        for row in range(run.top + 1):
            run.coef[row] = [a, b, math.inf]
    m = q.mirrored()
    assert m is not None
    # at X = 1 every run of size index 2's queue scores 1: the earlier filed first
    assert m.best(2, 2, 1.0) == [runs[1], runs[3]]
    assert m.best(2, 9, 2.0) == [runs[0], runs[1], runs[3]]  # X = 2: alpha counts
    assert m.best(0, 2, 1.0) == [runs[2], runs[4]]
    assert m.due(2, 0.0) == []
    q.release(runs[1])
    q.lower(runs[3], 1)
    assert m.best(2, 9, 1.0) == [runs[0]] and runs[1].slot == -1
    q.release(runs[0])
    q.release(runs[2])
    q.release(runs[3])
    assert q.mirrored() is None and runs[4].slot == -1  # one run left: ranked in Python again
