"""The finish rates the ORLOJ paper reports (appendix A, Tables 2-4), transcribed as printed.

``PAPER[case][slo] = (clipper, nexus, clockwork, orloj)``. The simulator's ``static`` workload is
compared with the paper's static-model rows of Table 4 through ``CASE_OF`` (inception-imagenet:
the first of its two static models; resnet-imagenet is kept for reference).
"""

from __future__ import annotations

__all__ = ["CASE_OF", "PAPER", "PAPER_POLICIES", "paper_value"]

PAPER_POLICIES = ("clipper", "nexus", "clockwork", "orloj")

_TABLES = """
std-0.5 1.5 0.01 0.01 0.44 0.57
std-0.5 2 0.01 0.02 0.53 0.76
std-0.5 3 0.04 0.05 0.62 0.96
std-0.5 4 0.11 0.13 0.61 0.99
std-0.5 5 0.20 0.25 0.57 1.00
std-1 1.5 0.02 0.02 0.46 0.60
std-1 2 0.03 0.03 0.53 0.76
std-1 3 0.10 0.10 0.55 0.97
std-1 4 0.21 0.19 0.53 0.99
std-1 5 0.33 0.34 0.56 1.00
std-2 1.5 0.04 0.03 0.43 0.59
std-2 2 0.07 0.05 0.51 0.73
std-2 3 0.19 0.13 0.55 0.97
std-2 4 0.34 0.30 0.50 1.00
std-2 5 0.49 0.54 0.59 1.00
std-2/0.5 1.5 0.16 0.18 0.52 0.75
std-2/0.5 2 0.28 0.32 0.59 0.83
std-2/0.5 3 0.61 0.68 0.60 0.98
std-2/0.5 4 0.89 0.93 0.59 0.96
std-2/0.5 5 0.97 1.00 0.63 1.00
std-0.5/2 1.5 0.01 0.01 0.38 0.40
std-0.5/2 2 0.01 0.02 0.50 0.61
std-0.5/2 3 0.04 0.04 0.57 0.90
std-0.5/2 4 0.08 0.09 0.66 0.97
std-0.5/2 5 0.15 0.17 0.52 0.99
one-modal 1.5 0.03 0.04 0.48 0.46
one-modal 2 0.10 0.13 0.55 0.74
one-modal 3 0.45 0.54 0.61 0.98
one-modal 4 0.73 0.80 0.58 1.00
one-modal 5 0.82 0.91 0.60 1.00
two-modal 1.5 0.01 0.03 0.45 0.60
two-modal 2 0.04 0.03 0.58 0.75
two-modal 3 0.13 0.14 0.51 0.97
two-modal 4 0.27 0.30 0.56 1.00
two-modal 5 0.37 0.44 0.55 1.00
three-modal 1.5 0.03 0.04 0.45 0.59
three-modal 2 0.05 0.05 0.55 0.68
three-modal 3 0.10 0.09 0.61 0.97
three-modal 4 0.18 0.23 0.60 0.99
three-modal 5 0.35 0.42 0.61 0.99
four-modal 1.5 0.03 0.05 0.46 0.59
four-modal 2 0.05 0.07 0.56 0.73
four-modal 3 0.08 0.12 0.59 0.94
four-modal 4 0.10 0.16 0.60 0.98
four-modal 5 0.14 0.19 0.60 1.00
five-modal 1.5 0.02 0.03 0.47 0.60
five-modal 2 0.02 0.03 0.55 0.73
five-modal 3 0.03 0.07 0.59 0.94
five-modal 4 0.04 0.08 0.57 0.97
five-modal 5 0.07 0.08 0.56 0.99
six-modal 1.5 0.04 0.04 0.46 0.58
six-modal 2 0.03 0.05 0.53 0.71
six-modal 3 0.06 0.08 0.53 0.92
six-modal 4 0.07 0.09 0.51 0.97
six-modal 5 0.08 0.11 0.54 0.99
seven-modal 1.5 0.03 0.05 0.43 0.59
seven-modal 2 0.04 0.05 0.51 0.73
seven-modal 3 0.08 0.09 0.54 0.93
seven-modal 4 0.10 0.12 0.52 0.98
seven-modal 5 0.12 0.15 0.54 0.99
eight-modal 1.5 0.03 0.04 0.33 0.60
eight-modal 2 0.05 0.06 0.49 0.74
eight-modal 3 0.08 0.09 0.43 0.93
eight-modal 4 0.09 0.13 0.52 0.97
eight-modal 5 0.11 0.14 0.50 0.99
inception-imagenet 1.5 0.01 0.01 0.16 0.41
inception-imagenet 2 0.31 0.30 0.58 0.48
inception-imagenet 3 0.86 0.88 0.84 0.84
inception-imagenet 4 0.96 0.97 0.82 0.99
inception-imagenet 5 0.98 0.98 0.83 0.99
resnet-imagenet 1.5 0.01 0.00 0.30 0.42
resnet-imagenet 2 0.15 0.15 0.59 0.48
resnet-imagenet 3 0.62 0.64 0.77 0.85
resnet-imagenet 4 0.89 0.91 0.88 0.98
resnet-imagenet 5 0.95 0.96 0.87 0.99
"""


def _parse(text: str) -> dict[str, dict[float, tuple[float, float, float, float]]]:
    out: dict[str, dict[float, tuple[float, float, float, float]]] = {}
    for line in text.strip().splitlines():
        case, slo, *vals = line.split()
        a, b, c, d = (float(v) for v in vals)
        out.setdefault(case, {})[float(slo)] = (a, b, c, d)
    return out


PAPER = _parse(_TABLES)
CASE_OF = {"static": "inception-imagenet"}


def paper_value(workload: str, slo: float, policy: str) -> float | None:
    """The paper's finish rate for a workload (by the simulator's name), SLO multiple and policy."""
    row = PAPER.get(CASE_OF.get(workload, workload), {}).get(float(slo))
    if row is None or policy not in PAPER_POLICIES:
        return None
    return row[PAPER_POLICIES.index(policy)]
