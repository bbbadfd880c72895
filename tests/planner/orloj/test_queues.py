import numpy as np

from adaserve.planner.orloj.queues import SizeQueues


def test_nested_membership_counts_and_release() -> None:
    q = SizeQueues(3, capacity=2)
    slots = [q.alloc() for _ in range(5)]  # grows past the initial capacity
    assert len(set(slots)) == 5
    for s, top in zip(slots, [2, 2, 1, 0, 0]):
        for i in range(top + 1):
            q.alpha[i, s], q.beta[i, s] = 0.0, float(s)
        q.enter(s, top)
    assert [q.members(i) for i in range(3)] == [5, 3, 2]
    q.enter(slots[0], 0)  # leaves the queues of sizes 1 and 2
    assert [q.members(i) for i in range(3)] == [5, 2, 1]
    assert np.isneginf(q.beta[1, slots[0]]) and np.isneginf(q.beta[2, slots[0]])
    q.release(slots[1])
    assert len(q) == 4 and [q.members(i) for i in range(3)] == [4, 1, 0]
    assert q.alloc() == slots[1]  # slots are reused


def test_best_ranks_by_alpha_x_plus_beta_within_the_queue() -> None:
    q = SizeQueues(2, capacity=8)
    rows = {0: (1.0, 0.0, 1), 1: (-1.0, 5.0, 1), 2: (0.0, 2.0, 0), 3: (2.0, -1.0, 1)}
    for a, b, top in rows.values():  # slots are handed out in order: slot == key
        s = q.alloc()
        for i in range(top + 1):
            q.alpha[i, s], q.beta[i, s] = a, b
        q.enter(s, top)
    # at X = 1: scores 1, 4, 2 (size-0 queue only), 1
    assert q.best(1, 2, 1.0) == [1, 0] or q.best(1, 2, 1.0) == [1, 3]
    assert q.best(0, 2, 1.0) == [1, 2]
    # at X = 4: scores 4, 1, -, 7
    assert q.best(1, 3, 4.0) == [3, 0, 1]
    assert q.best(1, 10, 4.0) == [3, 0, 1]  # never more than the queue holds


def test_rebase_scales_alpha() -> None:
    q = SizeQueues(1, capacity=1)
    s = q.alloc()
    q.alpha[0, s] = 2.0
    q.rebase(3.0)
    assert q.alpha[0, s] == 6.0


def test_lower_and_release_many() -> None:
    q = SizeQueues(3, capacity=4)
    slots = np.array([q.alloc() for _ in range(3)])
    for s in slots:
        q.beta[:, s] = 1.0
        q.items[s] = [f"item{s}"]
        q.enter(int(s), 2)
    q.lower(slots[:2], np.array([0, 1]))
    assert q.count.tolist() == [1, 1, 1]
    assert np.isneginf(q.beta[1:, slots[0]]).all() and q.beta[1, slots[1]] == 1.0
    assert q.release_many(slots[1:]) == [f"item{slots[1]}", f"item{slots[2]}"]
    assert len(q) == 1 and q.members(0) == 1 and np.isneginf(q.beta[:, slots[2]]).all()


def test_a_slot_holds_a_run_counted_per_request() -> None:
    q = SizeQueues(3, capacity=2)
    a, b = q.alloc(4), q.alloc(2)
    q.items[a], q.items[b] = ["a0", "a1", "a2", "a3"], ["b0", "b1"]
    q.enter(a, 2)
    q.enter(b, 1)
    assert len(q) == 6 and [q.members(i) for i in range(3)] == [6, 6, 4]
    q.lower(np.array([a]), np.array([0]))
    assert [q.members(i) for i in range(3)] == [6, 2, 0]
    assert q.release_many(np.array([b, a])) == ["b0", "b1", "a0", "a1", "a2", "a3"]
    assert len(q) == 0 and q.count.tolist() == [0, 0, 0] and q.size[a] == q.size[b] == 0


def test_take_splits_the_last_run_and_leaves_the_rest_in_its_slot() -> None:
    q = SizeQueues(2, capacity=4)
    slots = [q.alloc(n) for n in (2, 3, 4)]
    for s, name in zip(slots, "abc"):
        q.items[s] = [f"{name}{j}" for j in range(q.size[s])]
        q.enter(s, 1)
    order = np.array([slots[1], slots[0], slots[2]])
    got, used = q.take(order, 4)
    assert got == ["b0", "b1", "b2", "a0"] and used == 2
    assert q.items[slots[0]] == ["a1"] and q.size[slots[0]] == 1 and q.top[slots[0]] == 1
    assert len(q) == 5 and q.count.tolist() == [0, 5] and q.top[slots[1]] == -1
    got, used = q.take(np.array([slots[0], slots[2]]), 5)  # whole runs only
    assert got == ["a1", "c0", "c1", "c2", "c3"] and used == 2 and len(q) == 0
