"""HEFT's choice on constructed histories (StarONNX Sec. 5)."""

from __future__ import annotations

from adaserve.planner.heft import WHOLE, Histories, Key, Options, PoolInfo, choose

M = "net"


def histories(cpu_factor: float, trusted: bool = True) -> Histories:
    """GPU: whole 10 ms, part 1 8 ms, part 2 2.5 ms at every size; CPU ``cpu_factor`` times slower."""
    h = Histories()
    gpu = {WHOLE: 0.010, "part1": 0.008, "part2": 0.0025}
    for part, s in gpu.items():
        for kind, t in (("gpu", s), ("cpu", s * cpu_factor)):
            for b in (1, 8, 32):
                if trusted:
                    for _ in range(10):
                        h.observe(Key(M, part, kind), b, t)
                else:
                    h.seed(Key(M, part, kind), b, t)
    return h


def pools(gpu_at: float = 0.0, cpu_at: float = 0.0) -> dict[str, PoolInfo]:
    return {"gpu": PoolInfo("gpu", gpu_at), "cpu": PoolInfo("cpu", cpu_at)}


def xfer(size: int) -> float:
    return 0.001


def test_idle_gpu_takes_the_whole_batch() -> None:
    c = choose(M, 8, pools(), histories(3.0), xfer, backlog_s=0.0, now=0.0)
    assert c is not None and not c.split and c.pool == "gpu"
    assert c.finish == 0.010


def test_congested_gpu_splits_part2_to_the_cpu() -> None:
    # 5 batches queued behind this one: freeing the GPU 2 ms sooner moves all of them up.
    c = choose(M, 8, pools(gpu_at=0.02), histories(4.0), xfer, backlog_s=0.05, now=0.0)
    assert c is not None and c.split and (c.pool, c.next_pool) == ("gpu", "cpu")
    assert c.stages[0].part == "part1" and c.stages[1].part == "part2"
    # part 1 ends at 28 ms, the tensor arrives at 29 ms, part 2 takes 10 ms on the CPU; the GPU
    # is free for the 50 ms backlog at 28 ms instead of 30 ms
    assert abs(c.finish - 0.039) < 1e-9 and abs(c.objective - 0.078) < 1e-9
    # whole on the CPU (4x) is past the guard's 3x
    assert "whole@cpu" not in {lbl for lbl, _, _ in c.considered}


def test_busy_cpu_keeps_the_batch_whole() -> None:
    # the CPU is booked far ahead: part 2 there would end after the GPU cleared the backlog
    c = choose(M, 8, pools(gpu_at=0.02, cpu_at=0.5), histories(4.0), xfer, backlog_s=0.05, now=0.0)
    assert c is not None and not c.split and c.pool == "gpu"


def test_a_much_slower_cpu_never_takes_the_whole_model() -> None:
    h = histories(20.0)
    for gpu_at in (0.0, 0.05, 0.5, 5.0):
        for backlog in (0.0, 0.1, 1.0, 10.0):
            for size in (1, 8, 32):
                c = choose(M, size, pools(gpu_at=gpu_at), h, xfer, backlog_s=backlog, now=0.0)
                assert c is not None
                assert c.stages[0].pool == "gpu", (gpu_at, backlog, size, c.label)


def test_a_cpu_close_to_the_gpu_takes_whole_batches_when_the_gpu_is_far_behind() -> None:
    c = choose(M, 8, pools(gpu_at=1.0), histories(1.5), xfer, backlog_s=0.5, now=0.0)
    assert c is not None and c.label == "whole@cpu"


def test_the_reverse_split_only_when_allowed() -> None:
    h = histories(1.0)  # equal devices: part 1 on the CPU is admissible by speed
    labels = {lbl for lbl, _, _ in choose(M, 8, pools(), h, xfer, 0.0, 0.0).considered}  # type: ignore[union-attr]
    assert "part1@cpu->part2@gpu" not in labels
    labels = {lbl for lbl, _, _ in choose(M, 8, pools(), h, xfer, 0.0, 0.0,  # type: ignore[union-attr]
                                          Options(reverse=True)).considered}
    assert "part1@cpu->part2@gpu" in labels


def test_untrusted_histories_are_explored_when_cheap() -> None:
    h = histories(1.2)
    key = Key(M, WHOLE, "cpu")
    # forget the CPU's whole-model measurements: seeded only
    h._by_key[key] = {}
    for b in (1, 8, 32):
        h.seed(key, b, 0.012)
    c = choose(M, 8, pools(), h, xfer, backlog_s=0.0, now=0.0)
    assert c is not None and c.explored and c.label == "whole@cpu"
    c = choose(M, 8, pools(), h, xfer, backlog_s=0.0, now=0.0, options=Options(explore=0.0))
    assert c is not None and not c.explored and c.label == "whole@gpu"


def test_nothing_known_gives_none() -> None:
    assert choose("other", 8, pools(), histories(3.0), xfer, 0.0, 0.0) is None


def test_first_keeps_only_the_plans_starting_on_that_pool() -> None:
    c = choose(M, 8, pools(gpu_at=0.02), histories(3.0), xfer, backlog_s=0.05, now=0.0, first="gpu")
    assert c is not None and c.pool == "gpu" and {lbl.split("->")[0] for lbl, _, _ in c.considered} == {
        "whole@gpu", "part1@gpu"}
    assert choose(M, 8, pools(), histories(20.0), xfer, backlog_s=0.0, now=0.0, first="cpu") is not None


def test_the_guard_compares_a_stage_with_the_same_stage_elsewhere() -> None:
    # part 1 is a small share of the model: the whole on the GPU is not "slower than part 1"
    h = histories(3.0)
    c = choose(M, 8, pools(), h, xfer, backlog_s=0.0, now=0.0, options=Options(slack=1.1))
    assert c is not None and c.label == "whole@gpu"
    assert {lbl for lbl, _, _ in c.considered} == {"whole@gpu", "part1@gpu->part2@cpu"}


def test_a_kind_slower_than_its_profile_does_not_make_its_seeds_win() -> None:
    # profile: whole 10 ms, part 1 8 ms on the GPU kind; part 2 12.5 ms on the CPU kind. The host
    # runs the GPU kind at 2.8x its profile (measured on the whole model only): read unscaled, part 1's
    # seed would make the split (8 + 1 + 12.5 ms) look faster than the whole (28 ms) on an idle GPU
    h = Histories()
    for part, kind, t in ((WHOLE, "gpu", 0.010), ("part1", "gpu", 0.008), ("part2", "cpu", 0.0125)):
        h.seed(Key(M, part, kind), 1, t)
    h.observe(Key(M, WHOLE, "gpu"), 1, 0.028)
    c = choose(M, 1, pools(), h, xfer, backlog_s=0.0, now=0.0)
    assert c is not None and c.label == "whole@gpu", c.considered
    split = dict((lbl, f) for lbl, f, _ in c.considered)["part1@gpu->part2@cpu"]
    assert abs(split - (0.008 * 2.8 + 0.001 + 0.0125)) < 1e-12
