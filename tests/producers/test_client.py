"""The SDK against a real server, with a stand-in planner ending requests via the Finalizer."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from adaserve.broker import ConfigError, InvalidMessage, JobTimeout, Keys, LimitExceeded, Settings, load_limits, load_settings
from adaserve.producers import Client, make_job
from adaserve.producers.client import client_prefix


def arrays(*firsts: int) -> list[np.ndarray]:
    out = []
    for v in firsts:
        a = np.zeros((40, 32), np.float32)
        a[0, 0] = v
        out.append(a)
    return out


def test_round_trip_results_in_request_order(settings: Settings, r, standin) -> None:
    standin()
    with Client(settings) as c:
        h = c.submit(make_job("m", arrays(3, 1, 4), 1000, app="a1", run="r1"))
        res = h.result(timeout=5)
    assert [x.request_id for x in res.results] == ["0", "1", "2"]
    assert res.predictions == [3, 1, 4]
    assert res.counts == {"completed": 3, "expired": 0, "rejected": 0, "failed": 0}
    assert res.ok and res.app == "a1" and res.run == "r1"
    assert h.submitted_ms == float(h.entry_id.split("-")[0])
    assert res.latency_ms == max(x.timings.total_ms for x in res.results)


def test_job_is_sent_to_the_ingress_stream_with_the_clients_reply_channel(settings: Settings, r) -> None:
    with Client(settings, client_id="me-1") as c:
        h = c.submit(make_job("m", arrays(1), 500))
        entries = r.xrange(Keys(settings.namespace).jobs)
    from adaserve.broker.codec import decode
    job = decode(entries[0][1][b"m"])
    assert len(entries) == 1 and entries[0][0].decode() == h.entry_id
    assert job.reply_to == "me-1" and job.id == h.job_id


def test_result_times_out_when_a_request_never_ends(settings: Settings, r, standin) -> None:
    standin(lambda job, req: ("silent", None) if req.id == "1" else ("completed", 0))
    with Client(settings, read_block_ms=50) as c:
        h = c.submit(make_job("m", arrays(0, 0), 1000))
        with pytest.raises(JobTimeout, match="1 of 2"):
            h.result(timeout=0.3)
        assert not h.done() and c.outstanding == 1


def test_mixed_statuses_are_counted(settings: Settings, r, standin) -> None:
    standin(lambda job, req: ("expired", None) if req.id == "0" else ("completed", 7))
    with Client(settings) as c:
        res = c.submit(make_job("m", arrays(0, 0, 0), 1000)).result(5)
    assert res.counts["expired"] == 1 and res.counts["completed"] == 2
    assert not res.deadline_met and res.on_time == 2 and res.reasons == {"expired": 1}


def test_submit_many_pipelines_and_drain_collects_every_job(settings: Settings, r, standin) -> None:
    standin()
    with Client(settings, chunk=16) as c:
        jobs = [make_job("m", arrays(i % 10), 2000) for i in range(50)]
        handles = c.submit_many(jobs)
        assert len({h.entry_id for h in handles}) == 50
        done = c.drain(timeout=10)
        assert c.outstanding == 0
    assert sorted(j.job_id for j in done) == sorted(j.id for j in jobs)
    by_id = {j.id: j for j in jobs}
    for res in done:
        first = int(by_id[res.job_id].requests[0].inputs["input"].to_numpy()[0, 0])
        assert res.predictions == [first]


def test_prepared_jobs_are_sent_as_encoded_and_tracked_like_jobs(settings: Settings, r, standin) -> None:
    standin()
    with Client(settings, client_id="prep-1") as c:
        jobs = [make_job("m", arrays(i, i + 1), 2000, app="a2", run="r2") for i in range(5)]
        prepared = c.prepare(jobs)
        assert r.xlen(Keys(settings.namespace).jobs) == 0 and c.outstanding == 0  # nothing sent yet
        handles = c.submit_many([prepared[0], make_job("m", arrays(9), 2000), *prepared[1:]])
        done = {j.job_id: j for j in c.drain(timeout=10)}
    from adaserve.broker.codec import decode
    sent = [decode(fields[b"m"]) for _, fields in r.xrange(Keys(settings.namespace).jobs)]
    assert [j.id for j in sent] == [h.job_id for h in handles] and all(j.reply_to == "prep-1" for j in sent)
    for i, job in enumerate(jobs):
        assert done[job.id].predictions == [i, i + 1] and (done[job.id].app, done[job.id].run) == ("a2", "r2")


def test_a_prepared_job_goes_only_through_the_client_that_prepared_it(settings: Settings, r) -> None:
    with Client(settings, client_id="prep-a") as a, Client(settings, client_id="prep-b") as b:
        (p,) = a.prepare([make_job("m", arrays(1), 500)])
        with pytest.raises(InvalidMessage, match="prepared by client 'prep-a'"):
            b.submit_many([p])
        with pytest.raises(InvalidMessage, match="appears twice"):
            a.submit_many([p, p])
        assert a.outstanding == b.outstanding == 0
    with Client(settings, limits=load_limits(max_tensor_elements=10)) as small:
        with pytest.raises(LimitExceeded):  # checked when prepared, as when submitted
            small.prepare([make_job("m", arrays(1), 500)])
    assert r.xlen(Keys(settings.namespace).jobs) == 0


def test_many_threads_wait_on_their_own_handles(settings: Settings, r, standin) -> None:
    standin()
    with Client(settings, read_block_ms=20) as c:
        handles = c.submit_many([make_job("m", arrays(i), 2000) for i in range(8)])
        got: dict[int, list[int | None]] = {}
        errors: list[BaseException] = []

        def wait(i: int) -> None:
            try:
                got[i] = handles[i].result(timeout=10).predictions
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=wait, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
    assert not errors
    assert got == {i: [i] for i in range(8)}


def test_oversize_tensor_is_refused_before_sending(settings: Settings, r) -> None:
    limits = load_limits(max_tensor_elements=1000)
    with Client(settings, limits=limits) as c:
        with pytest.raises(LimitExceeded, match="1280 elements"):
            c.submit(make_job("m", arrays(1), 500))
        with pytest.raises(LimitExceeded):
            c.submit_many([make_job("m", [np.zeros(10, np.float32)], 500), make_job("m", arrays(1), 500)])
        assert c.outstanding == 0
    assert r.xlen(Keys(settings.namespace).jobs) == 0


def test_message_size_and_bad_fields_are_refused_before_sending(settings: Settings, r) -> None:
    with Client(settings, limits=load_limits(max_message_bytes=4096)) as c:
        with pytest.raises(LimitExceeded, match="bytes"):
            c.submit(make_job("m", arrays(1), 500))
    with pytest.raises(InvalidMessage):
        make_job("bad model name!", arrays(1), 500)
    with pytest.raises(LimitExceeded, match="deadline"):
        make_job("m", arrays(1), 0.001)
    with Client(settings, limits=load_limits(allowed_dtypes=("float32",))) as c:
        with pytest.raises(InvalidMessage, match="not allowed"):
            c.submit(make_job("m", [np.zeros(4, np.int64)], 500))
    assert r.xlen(Keys(settings.namespace).jobs) == 0


def test_a_job_id_in_flight_cannot_be_reused(settings: Settings, r) -> None:
    with Client(settings) as c:
        c.submit(make_job("m", arrays(1), 500, job_id="j1"))
        with pytest.raises(InvalidMessage, match="already in flight"):
            c.submit(make_job("m", arrays(1), 500, job_id="j1"))


def test_whole_job_rejection_lines_up_with_the_requests(settings: Settings, r) -> None:
    from adaserve.broker import Ending, Finalizer
    from adaserve.broker.messages import Result, Timings
    with Client(settings) as c:
        h = c.submit(make_job("m", arrays(1, 2), 500))
        res = Result(job_id=h.job_id, request_id="", status="rejected", reason="unknown_model",
                     timings=Timings(submitted_ms=0, finished_ms=1, total_ms=1))
        Finalizer(r, settings).end([Ending(res, c.client_id)])
        out = h.result(5)
    assert [x.request_id for x in out.results] == ["0", "1"]
    assert out.counts["rejected"] == 2 and out.reasons == {"unknown_model": 2}


def test_close_deletes_the_reply_stream(settings: Settings, r, standin) -> None:
    standin()
    c = Client(settings)
    c.submit(make_job("m", arrays(1), 500)).result(5)
    assert r.exists(c.reply_stream)
    c.close()
    assert not r.exists(c.reply_stream)


def test_bad_client_id_is_refused(settings: Settings) -> None:
    with pytest.raises(InvalidMessage, match="client id"):
        Client(settings, client_id="has space")


def test_clients_only_see_their_own_results(settings: Settings, r, standin) -> None:
    standin()
    with Client(settings) as a, Client(settings) as b:
        ha = a.submit_many([make_job("m", arrays(1), 1000) for _ in range(5)])
        hb = b.submit_many([make_job("m", arrays(2), 1000) for _ in range(3)])
        got_a, got_b = a.drain(timeout=5), b.drain(timeout=5)
        assert a.orphans == b.orphans == 0
    assert sorted(j.job_id for j in got_a) == sorted(h.job_id for h in ha)
    assert sorted(j.job_id for j in got_b) == sorted(h.job_id for h in hb)


def test_poll_and_results_claim_each_job_once(settings: Settings, r, standin) -> None:
    standin()
    with Client(settings, read_block_ms=20) as c:
        handles = c.submit_many([make_job("m", arrays(i), 1000) for i in range(4)])
        first = handles[0].result(5)  # claimed through its handle
        rest = list(c.results(timeout=5))
        assert c.poll(0.01) == [] and c.outstanding == 0
    assert first.job_id not in {j.job_id for j in rest}
    assert len(rest) == 3 and handles[0].result(0) is first


def test_nan_and_inf_inputs_are_refused_before_sending_unless_allowed(settings: Settings, r, standin) -> None:
    bad = arrays(1)[0]
    bad[3, 4] = np.nan
    with Client(settings) as c:
        with pytest.raises(InvalidMessage) as exc:
            c.submit(make_job("m", [arrays(1)[0], bad], 500))
        assert exc.value.reason == "non_finite" and "request 1" in str(exc.value)
    assert r.xlen(Keys(settings.namespace).jobs) == 0
    standin()
    with Client(settings, limits=load_limits(allow_non_finite=("m",))) as c:
        assert c.submit(make_job("m", [bad], 500)).result(5).completed == 1


def test_client_ids_take_their_prefix_from_the_setting_or_the_urls_user() -> None:
    """A producer's ACL user reads the reply streams of its prefix only (``broker.acl``)."""
    assert client_prefix(load_settings(redis_url="redis://ada-producer:pw@h:1/0")) == "ada-producer"
    assert client_prefix(load_settings(redis_url="redis://u:pw@h:1/0", client_prefix="app1")) == "app1"
    assert client_prefix(load_settings(redis_url="redis://:pw@h:1/0")) == "c"
    with pytest.raises(ConfigError, match="ADASERVE_CLIENT_PREFIX"):
        load_settings(client_prefix="app*")


def test_poll_with_nothing_in_flight_waits_its_timeout_instead_of_returning_at_once(
    settings: Settings, r, standin,
) -> None:
    # A driver pacing its submissions with poll(time to the next job) spun a core before.
    standin()
    with Client(settings, read_block_ms=20) as c:
        t0 = time.monotonic()
        assert c.poll(0.3) == []
        assert time.monotonic() - t0 >= 0.29
        got: list[str] = []
        waiter = threading.Thread(target=lambda: got.extend(j.job_id for j in c.poll(5.0)))
        waiter.start()
        time.sleep(0.1)
        h = c.submit(make_job("m", arrays(1), 1000))  # wakes the waiting poll, which then reads
        waiter.join(6)
        assert got == [h.job_id]


@pytest.mark.parametrize("split", [False, True])
def test_a_job_is_filed_from_columns_entries_whole_or_request_by_request(settings: Settings, r, split: bool) -> None:
    """A job that ran as one batch comes back as one ``columns`` entry, filed whole; a job split
    over batches (two entries) is filed per request: the same results either way."""
    import msgpack

    with Client(settings) as c:
        h = c.submit(make_job("m", arrays(3, 1, 4), 1000))
        parts = [["0", "1"], ["2"]] if split else [["0", "1", "2"]]
        for ids in parts:
            n = len(ids)
            body = {"v": 1, "type": "columns", "job_id": h.job_id, "app": "default", "model": "m", "plan": None,
                    "worker": "w", "job_accuracy": None, "status": "completed", "request_ids": ids,
                    "prediction": [int(i) + 7 for i in ids], "confidence": [0.5] * n, "exit": [None] * n,
                    "outputs": {}, "timings": {"submitted_ms": 1.0, "dispatched_ms": 2.0, "started_ms": 3.0,
                                               "finished_ms": 9.0, "total_ms": 8.0, "queue_ms": [1.0] * n,
                                               "exec_ms": [2.0] * n}}
            r.xadd(c.reply_stream, {b"m": msgpack.packb(body, use_bin_type=True)})
        res = h.result(timeout=5)
        assert (res._columns is None) == split  # filed whole only when one entry held the whole job
        if split:  # filed as references to the entries' rows, no map per request until .results
            assert res._maps is not None and all(type(m).__name__ == "ColumnRef" for m in res._maps)
        assert res.predictions == [7, 8, 9] and res.ok and [x.request_id for x in res.results] == ["0", "1", "2"]
        assert c.duplicates == 0 and c.orphans == 0
