"""The ingest measurement runs and leaves nothing behind (its figure is printed, not asserted)."""

from __future__ import annotations

from adaserve.broker import Keys, Settings
from adaserve.producers.ingest import measure_ingest


def test_measure_ingest(settings: Settings, r, capsys) -> None:
    f = measure_ingest(settings, jobs=300, chunk=64)
    assert f.jobs == 300 and f.tensor_shape == (40, 32) and f.message_bytes > 40 * 32 * 4
    assert f.jobs_per_s > 0 and not r.exists(Keys(settings.namespace).jobs)
    with capsys.disabled():
        print(f"\ningest: {f.jobs_per_s:.0f} jobs/s (300 jobs, chunk 64; figure, not a test)")
