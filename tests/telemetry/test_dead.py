"""Dead letters as ``adaserve dead`` lists them."""

from __future__ import annotations

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import encode_map
from adaserve.broker.streams import dead_letter
from adaserve.telemetry.dead import dead_count, read_dead


def test_read_dead_summarises_raw_bytes(settings: Settings, r) -> None:
    dead = Keys(settings.namespace).dead
    raw = encode_map({"v": 1, "type": "job", "id": "j-7", "app": "shop", "reply_to": "c1", "requests": "x" * 100})
    dead_letter(r, dead, reason="schema", detail="requests: not a list", source="jobs", entry_id="1-0", raw=raw)
    dead_letter(r, dead, reason="undecodable", detail="not msgpack", source="jobs", entry_id="2-0", raw=b"\xc1" * 10)
    letters = read_dead(r, settings, count=5)
    assert dead_count(r, settings) == 2
    assert [d.reason for d in letters] == ["undecodable", "schema"]
    newest, oldest = letters
    assert newest.raw_bytes == 10 and newest.job_id == ""
    assert oldest.raw_bytes == len(raw) and oldest.job_id == "j-7" and oldest.app == "shop"
    assert oldest.entry == "1-0" and oldest.ts > 0 and "raw" not in oldest.model_dump()
    assert len(read_dead(r, settings, count=1)) == 1
