from adaserve.planner.sim.paper import PAPER, paper_value


def test_transcribed_values() -> None:
    assert PAPER["std-0.5"][1.5] == (0.01, 0.01, 0.44, 0.57)
    assert PAPER["eight-modal"][5.0] == (0.11, 0.14, 0.50, 0.99)
    assert paper_value("two-modal", 3, "orloj") == 0.97
    assert paper_value("static", 2.0, "clockwork") == 0.58  # inception-imagenet
    assert paper_value("two-modal", 3, "fifo") is None
    assert paper_value("nine-modal", 3, "orloj") is None
    assert all(len(rows) == 5 for rows in PAPER.values())
