from collections.abc import Callable

import msgpack
import numpy as np
import pytest
import redis

from adaserve.broker import Ending, Finalizer, Job, Keys, Request, Result, Settings, Slo, Tensor, Timings, decode, probe, streams
from adaserve.broker.codec import encode_map
from adaserve.broker.direct import Direct
from adaserve.broker.replies import read_reply

MakeFin = Callable[["redis.Redis[bytes]", Settings], Finalizer]


@pytest.fixture(params=["redis-py", "direct"])
def make_fin(request: pytest.FixtureRequest) -> MakeFin:
    """Each finaliser test twice: its round trips through redis-py, and on a held ``Direct``
    connection (the worker's publisher and the planner use that one)."""
    if request.param == "direct":
        return lambda r, settings: Finalizer(r, settings, direct=Direct(r))
    return Finalizer


def test_probe_reports_streams_capabilities(r: "redis.Redis[bytes]") -> None:
    info = probe(r)
    assert info.xautoclaim and info.version >= (6, 2, 0)


def test_group_read_ack_and_reclaim_walks_the_cursor(r: "redis.Redis[bytes]", settings: Settings) -> None:
    s = Keys(settings.namespace).batches("cpu")
    assert streams.ensure_group(r, s, "cpu") and not streams.ensure_group(r, s, "cpu")
    ids = [streams.publish(r, s, f"x{i}".encode()) for i in range(25)]
    got = streams.read_group(r, [s], "cpu", "dead-worker", count=100, block_ms=10)
    assert [e.id for e in got] == ids
    assert streams.read_group(r, [s], "cpu", "other", count=100, block_ms=10) == []
    # Nothing is idle long enough yet; with min_idle 0 every entry moves, 7 per XAUTOCLAIM call.
    assert list(streams.reclaim(r, s, "cpu", "other", min_idle_ms=60_000)) == []
    moved = list(streams.reclaim(r, s, "cpu", "other", min_idle_ms=0, count=7))
    assert [e.id for e in moved] == ids and moved[0].raw == b"x0"
    assert streams.deliveries(r, s, "cpu", ids[0]) == 2
    assert streams.ack(r, s, "cpu", *ids) == 25
    assert streams.deliveries(r, s, "cpu", ids[0]) == 0


def test_reclaim_reports_entries_deleted_while_pending(r: "redis.Redis[bytes]", settings: Settings) -> None:
    s = Keys(settings.namespace).batches("cpu")
    streams.ensure_group(r, s, "cpu")
    mid = streams.publish(r, s, b"x")
    streams.read_group(r, [s], "cpu", "a", block_ms=10)
    r.xdel(s, mid)
    moved = list(streams.reclaim(r, s, "cpu", "b", min_idle_ms=0))
    assert [(e.id, e.raw) for e in moved] == [(mid, None)]


def test_dead_letter_keeps_reason_and_bytes(r: "redis.Redis[bytes]", settings: Settings) -> None:
    k = Keys(settings.namespace)
    streams.dead_letter(r, k.dead, reason="schema", detail="bad", source=k.jobs, entry_id="1-0", raw=b"\x01\x02")
    (_, fields), = r.xrange(k.dead)
    assert fields[b"reason"] == b"schema" and fields[b"raw"] == b"\x01\x02" and fields[b"entry"] == b"1-0"


def _job(n: int) -> Job:
    t = Tensor.from_numpy(np.zeros(1, np.float32))
    return Job(id="j", model="m", reply_to="c", slo=Slo(deadline_ms=1000),
               requests=[Request(id=f"r{i}", inputs={"x": t}) for i in range(n)])


def _end(rid: str, status: str) -> Ending:
    res = Result(job_id="j", request_id=rid, status=status, timings=Timings(submitted_ms=0, finished_ms=1, total_ms=1))  # type: ignore[arg-type]
    return Ending(res, "c")


def test_finalizer_ends_each_request_once_and_completes_the_job(
        r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin) -> None:
    k = Keys(settings.namespace)
    fin = make_fin(r, settings)
    assert fin.register(_job(3), "5-0", 5.0) == 1
    assert fin.register(_job(3), "5-0", 5.0) == 0  # redelivery of the same entry
    assert fin.register(_job(3), "6-0", 6.0) == -1  # a second job with the same id
    streams.ensure_group(r, k.batches("cpu"), "cpu")
    bid = streams.publish(r, k.batches("cpu"), b"batch")
    streams.read_group(r, [k.batches("cpu")], "cpu", "w", block_ms=10)
    assert fin.end([_end("r0", "completed"), _end("r1", "completed")], ack=(k.batches("cpu"), "cpu", bid)) == 2
    assert streams.deliveries(r, k.batches("cpu"), "cpu", bid) == 0
    assert fin.end([_end("r1", "completed"), _end("r2", "expired")]) == 1  # r1 already ended
    assert fin.end([_end("r2", "failed")]) == 0
    entries = streams.read(r, {k.reply("c"): "0"})
    # r0 and r1, ended together, went out as one `results` entry; r2, alone, as a `result`
    assert [msgpack.unpackb(e.raw)["type"] for e in entries] == ["results", "result"]
    results = [x for e in entries for x in read_reply(e.raw)]
    assert sorted((x.request_id, x.status) for x in results) == [("r0", "completed"), ("r1", "completed"), ("r2", "expired")]
    events = [decode(e.raw) for e in streams.read(r, {k.telemetry: "0"})]
    (done,) = [e for e in events if e.event == "job.completed"]
    assert (done.requests, done.completed, done.expired, done.failed) == (3, 2, 1, 0)


def test_finalizer_deletes_the_acked_entry_only_when_asked_and_only_once_all_ended(
        r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin) -> None:
    k = Keys(settings.namespace)
    s = k.batches("cpu")
    fin = make_fin(r, settings)
    fin.register(_job(4), "5-0", 5.0)
    streams.ensure_group(r, s, "cpu")
    kept, gone, again = (streams.publish(r, s, f"b{i}".encode()) for i in range(3))
    streams.read_group(r, [s], "cpu", "w", block_ms=10)
    assert fin.end([_end("r0", "completed")], ack=(s, "cpu", kept)) == 1
    assert fin.end([_end("r1", "completed"), _end("r2", "completed")], ack=(s, "cpu", gone), delete=True) == 2
    # a redelivery whose requests partly ended: the script asks again; deleted with the ack
    assert fin.end([_end("r2", "completed"), _end("r3", "completed")], ack=(s, "cpu", again), delete=True) == 1
    assert [eid.decode() for eid, _ in r.xrange(s)] == [kept]
    assert all(streams.deliveries(r, s, "cpu", e) == 0 for e in (kept, gone, again))


def test_finalizer_keeps_the_job_hash_and_reply_stream_for_the_result_ttl(
    r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin,
) -> None:
    k = Keys(settings.namespace)
    fin = make_fin(r, settings)
    fin.register(_job(3), "5-0", 5.0)
    r.persist(k.job("j"))  # the TTL checked below must come from ending, not from registering
    assert fin.end([_end("r0", "completed"), _end("r1", "completed")]) == 2
    for key in (k.job("j"), k.reply("c")):
        assert 0 < r.ttl(key) <= settings.result_ttl_s


def test_last_id_and_events_skip_what_is_not_an_event(r: "redis.Redis[bytes]", settings: Settings) -> None:
    stream = Keys(settings.namespace).telemetry
    assert streams.last_id(r, stream) == "0-0"
    good = r.xadd(stream, {b"m": streams.event_bytes(event="worker.stopped", ts=1.0, worker="w", pool="cpu")})
    r.xadd(stream, {b"m": b"\xc1"})  # undecodable
    r.xadd(stream, {b"other": b"x"})  # no message field
    last = r.xadd(stream, {b"m": encode_map({"v": 1, "type": "result", "job_id": "j"})}).decode()  # not an event
    assert streams.last_id(r, stream) == last
    got = list(streams.events(streams.read(r, {stream: "0-0"})))
    assert [(e.id, ev.event) for e, ev in got] == [(good.decode(), "worker.stopped")]


def test_trim_consumed_drops_only_what_the_group_is_done_with(r: "redis.Redis[bytes]", settings: Settings) -> None:
    stream = Keys(settings.namespace).jobs
    for i in range(1, 11):
        r.xadd(stream, {"m": b"x"}, id=f"{1000 * i}-0")
    streams.ensure_group(r, stream, "g")
    got = streams.read_group(r, [stream], "g", "c", count=6, block_ms=None)
    streams.ack(r, stream, "g", *[e.id for e in got[:4]])  # entries 5 and 6 stay pending, 7-10 unread
    assert streams.trim_consumed(r, stream, "g", keep_ms=0, now_ms=1e9, approximate=False) == 4
    assert r.xrange(stream)[0][0] == b"5000-0"
    streams.ack(r, stream, "g", *[e.id for e in got[4:]])
    # the unread entries stay; so does everything younger than keep_ms
    assert streams.trim_consumed(r, stream, "g", keep_ms=3500, now_ms=10_000, approximate=False) == 1
    assert r.xlen(stream) == 5
    assert streams.trim_consumed(r, stream, "missing-group", keep_ms=0, now_ms=1e9) == 0
    assert streams.trim_consumed(r, "no-such-stream", "g", keep_ms=0, now_ms=1e9) == 0


def test_registration_survives_a_server_that_lost_its_scripts(
        r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin) -> None:
    fin = make_fin(r, settings)
    r.script_flush()  # as a restart without persistence leaves it
    assert fin.register_all([(_job(2), "7-0", 7.0, ""), (_job(2), "7-0", 7.0, "")]) == [1, 0]


def test_registration_writes_every_field_of_the_job_hash_and_its_ttl(
        r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin) -> None:
    fin = make_fin(r, settings)
    assert fin.register_all([(_job(3), "9-0", 9.5, "abc")]) == [1]
    key = Keys(settings.namespace).job("j")
    assert r.hgetall(key) == {b"entry": b"9-0", b"n": b"3", b"digest": b"abc", b"id": b"j", b"app": b"default",
                              b"model": b"m", b"run": b"", b"remaining": b"3", b"submitted_ms": b"9.5",
                              b"deadline_ms": b"1000.0"}
    assert 0 < r.ttl(key) <= settings.result_ttl_s


@pytest.mark.parametrize("flush", [False, True])
def test_registration_carries_other_commands_on_its_round_trip(r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin,
                                                               flush: bool) -> None:
    fin = make_fin(r, settings)
    side = Keys(settings.namespace).telemetry
    r.xadd(side, {"m": b"x"})
    got: list[list[object]] = []

    def also(p: "redis.client.Pipeline[bytes]") -> Callable[[list[object]], None]:
        p.xlen(side)
        p.xinfo_groups("no-such-stream")  # an error reply stays with its command
        return got.append

    if flush:
        r.script_flush()
    assert fin.register_all([(_job(2), "8-0", 8.0, "")], also=also) == [1]
    (replies,) = got
    assert replies[0] == 1 and isinstance(replies[1], redis.ResponseError)


def test_a_redelivered_batch_ends_only_the_rest_and_is_acked_once(
        r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin) -> None:
    """A job whose requests all end together costs one flag write and one entry; a batch that
    finds some already ended sends the rest one by one, then acks and reports, exactly once."""
    k = Keys(settings.namespace)
    fin = make_fin(r, settings)
    fin.register(_job(4), "5-0", 5.0)
    streams.ensure_group(r, k.batches("cpu"), "cpu")
    bid = streams.publish(r, k.batches("cpu"), b"batch")
    streams.read_group(r, [k.batches("cpu")], "cpu", "w", block_ms=10)
    assert fin.end([_end("r0", "expired")]) == 1  # the planner expired r0 meanwhile
    ack = (k.batches("cpu"), "cpu", bid)
    batch = [_end(f"r{i}", "completed") for i in range(4)] + [_end("r3", "completed")]  # r3 listed twice
    assert fin.end(batch, ack=ack, event=b"finished") == 3
    assert streams.deliveries(r, k.batches("cpu"), "cpu", bid) == 0  # acked
    assert fin.end(batch, ack=ack, event=b"finished") == 0  # and again: nothing new
    results = [x for e in streams.read(r, {k.reply("c"): "0"}) for x in read_reply(e.raw)]
    assert sorted((x.request_id, x.status) for x in results) == [
        ("r0", "expired"), ("r1", "completed"), ("r2", "completed"), ("r3", "completed")]
    raws = [e.raw for e in streams.read(r, {k.telemetry: "0"})]
    assert raws.count(b"finished") == 2  # once per end() of the batch, as a redelivery always reported
    (done,) = [decode(x) for x in raws if x != b"finished" and msgpack.unpackb(x).get("event") == "job.completed"]
    assert (done.requests, done.completed, done.expired) == (4, 3, 1)
    assert r.hget(k.job("j"), "remaining") == b"0"


def test_a_job_ended_whole_costs_one_flag_write(
        r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin) -> None:
    fin = make_fin(r, settings)
    fin.register(_job(32), "5-0", 5.0)

    def calls() -> dict[str, int]:
        stats = r.info("commandstats")
        return {c: int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("hset", "hsetnx", "xadd")}

    before = calls()
    assert fin.end([_end(f"r{i}", "completed") for i in range(32)]) == 32
    after = calls()
    # one HSET of the 32 flags, one XADD of the `results` entry and one of job.completed
    assert {c: after[c] - before[c] for c in after} == {"hset": 1, "hsetnx": 0, "xadd": 2}


def test_a_job_given_its_own_entry_goes_as_that_entry_and_a_redelivery_builds_each_result(
        r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin) -> None:
    """A worker's ``columns`` entry is published as given, the requests' own entries never built;
    when some of the job's requests had ended, the rest go out one by one, built only then."""
    from adaserve.broker.finalize import Packed

    k = Keys(settings.namespace)
    fin = make_fin(r, settings)
    built: list[str] = []

    def packed(job: str) -> list[Packed]:
        def own(e: Ending) -> bytes:
            built.append(e.result.request_id)
            return encode_map(e.result.model_dump(mode="python"))

        ends = [Ending(_end(f"r{i}", "completed").result.model_copy(update={"job_id": job}), "c") for i in range(3)]
        return [Packed(job, e.result.request_id, "completed", "c", build=lambda e=e: own(e)) for e in ends]

    fin.register(_job(3), "5-0", 5.0)
    assert fin.end_packed(packed("j"), entries={("j", "c"): b"whole"}) == 3
    assert [e.raw for e in streams.read(r, {k.reply("c"): "0"})] == [b"whole"] and built == []
    fin.register(_job(3).model_copy(update={"id": "j2"}), "6-0", 6.0)
    assert fin.end([Ending(_end("r0", "expired").result.model_copy(update={"job_id": "j2"}), "c")]) == 1
    assert fin.end_packed(packed("j2"), entries={("j2", "c"): b"whole"}) == 2
    got = [read_reply(e.raw) for e in streams.read(r, {k.reply("c"): "0"})[1:]]
    assert [(x.job_id, x.request_id, x.status) for res in got for x in res] == [
        ("j2", "r0", "expired"), ("j2", "r1", "completed"), ("j2", "r2", "completed")]
    assert built == ["r0", "r1", "r2"]  # the second call sends every request's own entry


def test_ends_queued_on_a_pipeline_go_in_order_and_survive_a_flushed_script_cache(
    r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin,
) -> None:
    """The planner's expiries ride its pipeline: results before the commands queued after them,
    no script cache needed, and a job some of whose requests had ended is finished by the taker."""
    k = Keys(settings.namespace)
    fin = make_fin(r, settings)
    fin.register(_job(3), "5-0", 5.0)
    assert fin.end([_end("r0", "completed")]) == 1
    r.script_flush()  # a restarted server: EVALSHA would fail here while the XADD after it succeeds
    with r.pipeline(transaction=False) as p:
        p.xadd(k.telemetry, {b"m": b"before"})
        at = len(p)
        take = fin.queue_end(p, [_end("r0", "expired"), _end("r1", "expired"), _end("r2", "expired")])
        p.xadd(k.telemetry, {b"m": b"after"})
        replies = p.execute(raise_on_error=False)
    assert take(replies[at]) == 2  # r0 had ended: the others go one entry each, on a second call
    results = [x for e in streams.read(r, {k.reply("c"): "0"}) for x in read_reply(e.raw)]
    assert sorted((x.request_id, x.status) for x in results) == [("r0", "completed"), ("r1", "expired"), ("r2", "expired")]
    assert r.hget(k.job("j"), "remaining") == b"0"
    with r.pipeline(transaction=False) as p:
        at = len(p)
        take = fin.queue_end(p, [_end("r1", "failed")])
        assert take(p.execute(raise_on_error=False)[at]) == 0  # ended already: nothing new


def test_a_queued_end_reports_a_server_error_to_its_taker(
        r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin) -> None:
    fin = make_fin(r, settings)
    r.set(Keys(settings.namespace).job("j"), b"not a hash")
    with r.pipeline(transaction=False) as p:
        take = fin.queue_end(p, [_end("r0", "expired")])
        replies = p.execute(raise_on_error=False)
    with pytest.raises(redis.ResponseError):
        take(replies[0])


def test_a_group_of_one_status_goes_compact_and_ends_as_the_long_form_ends_it(
        r: "redis.Redis[bytes]", settings: Settings, make_fin: MakeFin) -> None:
    """A job's requests that share a status and one entry travel as -n, the entry, the status and
    the ids (a third of the arguments); the job hash, reply stream and events they leave are
    those of the long form, which a group of mixed statuses still takes."""
    from adaserve.broker.finalize import Packed

    k = Keys(settings.namespace)
    fin = make_fin(r, settings)

    def group(job: str, statuses: list[str]) -> list[Packed]:
        return [Packed(job, f"r{i}", s, "c", raw=b"own") for i, s in enumerate(statuses)]

    same, mixed = group("j", ["completed"] * 3), group("j2", ["completed", "completed", "expired"])
    _, args = fin._args([(("j", "c"), same), (("j2", "c"), mixed)], None, b"", whole=True, entries={("j", "c"): b"whole"})
    assert args[6] == ""  # nothing acked, nothing to delete
    assert args[7:13] == [-3, b"whole", "completed", "r0", "r1", "r2"]
    assert args[13:15] == [3, args[14]] and args[15:18] == ["r0", "completed", b""]  # the long form
    hashes = {}
    for job, statuses in (("j", ["completed"] * 3), ("j2", ["completed"] * 3)):
        fin.register(_job(3).model_copy(update={"id": job}), "5-0", 5.0)
        got = group(job, statuses)
        if job == "j":
            assert fin.end_packed(got, entries={(job, "c"): b"whole"}) == 3
        else:  # the long form, as the script took every group before
            keys, long_args = fin._args([((job, "c"), got)], None, b"", whole=True, entries={(job, "c"): b"whole"})
            long_args[7:] = [3, b"whole"] + [x for p in got for x in (p.request_id, p.status, b"")]
            assert list(r.eval(fin._script.script, len(keys), *keys, *long_args)) == [3]
        h = r.hgetall(k.job(job))
        hashes[job] = {f: v for f, v in h.items() if f not in (b"id", b"entry")}
    assert hashes["j"] == hashes["j2"] and hashes["j"][b"d:r1"] == b"completed" and hashes["j"][b"remaining"] == b"0"
    assert [e.raw for e in streams.read(r, {k.reply("c"): "0"})] == [b"whole", b"whole"]
    done = [decode(e.raw) for e in streams.read(r, {k.telemetry: "0"})]
    assert [(e.job_id, e.completed) for e in done if e.event == "job.completed"] == [("j", 3), ("j2", 3)]
    # and again (a redelivery): nothing new, the compact group reported and ended long
    assert fin.end_packed(group("j", ["completed"] * 3), entries={("j", "c"): b"whole"}) == 0
