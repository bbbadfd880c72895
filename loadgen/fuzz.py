"""A seeded generator of hostile ingress entries, each labelled with its kind and its due ending.

Every kind is something a broken or malicious producer can XADD to ``{ns}:jobs``: random and
truncated bytes, deep nesting, huge maps and strings (within and beyond the limits), wrong types,
missing and extra fields, negative, zero and enormous shapes, unknown dtypes, unicode and overlong
ids, NaN and ±Inf, bad reply channels, unknown models, deadlines out of range. The same seed gives
the same entries.

Each entry says what the planner owes it. All of them end in the dead letters; an entry whose
job id and reply channel the planner can still read (``addressable``) also gets one ``rejected``
result per well-formed request id it names (one for the job when it names none): ``results``.
``reason`` is the code the rejection must carry where the kind decides it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from adaserve.broker.settings import Limits

ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")  # the ids a rejection can be addressed with
_NOT_MAP_START = [b for b in range(256) if not (0x80 <= b <= 0x8F or b in (0xDE, 0xDF))]
_UNICODE = ["jöb", "ジョブ", "\u202eevil", "emoji-\U0001f4a5", "tab\there", "nul\x00id", "ὀδυσσεύς", "a b", "{x}"]
_BAD_DTYPES = ["float128", "complex64", "<f4", "", "str", "object", "bfloat16", "F32", "float32 ", "x" * 40]


@dataclass(frozen=True)
class Hostile:
    kind: str
    fields: dict[bytes, bytes]  # the stream entry
    job_id: str  # "" when the planner cannot address a result
    results: int  # ``rejected`` results owed on the reply stream
    reason: str | None = None  # the rejection's code, where the kind decides it


def owed(body: Any, reply_to: str, max_ids: int = 1024) -> tuple[str, int]:
    """(job id, results) the wire contract owes ``body``: one per well-formed request id, one for
    the job when it names none or more than a job may hold (``max_ids``); nothing when its id or
    reply channel is unusable."""
    if not isinstance(body, dict) or not isinstance(body.get("id"), str) or not ID.match(body["id"]):
        return "", 0
    if not isinstance(body.get("reply_to"), str) or not ID.match(body["reply_to"]) or body["reply_to"] != reply_to:
        return "", 0
    reqs = body.get("requests")
    ids = [r["id"] for r in reqs if isinstance(r, dict) and isinstance(r.get("id"), str) and ID.match(r["id"])] \
        if isinstance(reqs, list) else []
    return body["id"], 1 if len(ids) > max_ids else max(len(ids), 1)


class Fuzzer:
    """Hostile entries for ``model`` (whose inputs are ``inputs``: name -> (shape, dtype)); the
    addressable ones name ``reply_to``. Job ids are ``<tag>-<n>``."""

    def __init__(self, seed: int, *, model: str, inputs: dict[str, tuple[tuple[int, ...], str]], reply_to: str,
                 limits: Limits, tag: str = "fz") -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.np = np.random.default_rng(seed)
        self.model, self.inputs, self.reply_to, self.limits, self.tag = model, inputs, reply_to, limits, tag
        self.n = 0
        self._kinds = list(KINDS)
        self._weights = [KINDS[k][0] for k in self._kinds]

    def __iter__(self) -> Iterator[Hostile]:
        while True:
            yield self.next()

    def next(self, kind: str | None = None) -> Hostile:
        kind = kind or self.rng.choices(self._kinds, self._weights)[0]
        self.n += 1
        return KINDS[kind][1](self, kind)

    # -- building blocks ------------------------------------------------------------------------
    def job_id(self) -> str:
        return f"{self.tag}-{self.n}"

    def tensor(self, shape: tuple[int, ...] | None = None, dtype: str | None = None, name: str | None = None
               ) -> dict[str, Any]:
        spec_shape, spec_dtype = self.inputs[name or next(iter(self.inputs))]
        shape = spec_shape if shape is None else shape
        dt = np.dtype(dtype or spec_dtype)
        n = int(np.prod(shape))
        arr = self.np.standard_normal(n).astype(dt) if dt.kind == "f" else self.np.integers(0, 2, n).astype(dt)
        return {"dtype": dt.name, "shape": list(shape), "data": arr.astype(dt.newbyteorder("<")).tobytes()}

    def body(self, requests: int = 1) -> dict[str, Any]:
        """A job the planner would accept."""
        return {"v": 1, "type": "job", "id": self.job_id(), "app": "fuzz", "model": self.model,
                "requests": [{"id": f"r{i}", "kind": "forward", "inputs": {k: self.tensor(name=k) for k in self.inputs}}
                             for i in range(requests)],
                "slo": {"deadline_ms": 10_000.0, "min_accuracy": 0.0, "objective": "latency"},
                "reply_to": self.reply_to, "priority": 0, "run": self.tag}

    def packed(self, kind: str, body: Any, reason: str | None = None, raw: bytes | None = None) -> Hostile:
        job_id, results = owed(body, self.reply_to, self.limits.max_requests_per_job)
        data = raw if raw is not None else msgpack.packb(body, use_bin_type=True)
        return Hostile(kind, {b"m": data}, job_id, results, reason)

    def dead(self, kind: str, raw: bytes, reason: str | None = None) -> Hostile:
        return Hostile(kind, {b"m": raw}, "", 0, reason)

    def one_request(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """A valid body, its first request and that request's first tensor, to spoil."""
        b = self.body(self.rng.randint(1, 3))
        req = b["requests"][0]
        return b, req, next(iter(req["inputs"].values()))

    def text(self, n: int) -> str:
        return "".join(self.rng.choices("abcdefghijklmnopqrstuvwxyz0123456789-_.:", k=n))


# -- the kinds: undecodable or unaddressable (dead letter only) --------------------------------------

def _random_bytes(f: Fuzzer, kind: str) -> Hostile:
    n = f.rng.choice([0, 1, 2, f.rng.randint(3, 64), f.rng.randint(65, 4096)])
    raw = bytes([f.rng.choice(_NOT_MAP_START)]) + f.rng.randbytes(n) if n else b""
    return f.dead(kind, raw)


def _truncated(f: Fuzzer, kind: str) -> Hostile:
    raw = msgpack.packb(f.body(f.rng.randint(1, 3)), use_bin_type=True)
    return f.dead(kind, raw[:f.rng.randrange(0, len(raw))], "undecodable")


def _not_a_map(f: Fuzzer, kind: str) -> Hostile:
    value = f.rng.choice([[1, 2, 3], f.rng.randint(-2**63, 2**64 - 1), f.text(20), None, 1.5, float("nan"),
                          f.rng.randbytes(30), [f.body()], True])
    return f.dead(kind, msgpack.packb(value, use_bin_type=True), "schema")


def _deep_beyond(f: Fuzzer, kind: str) -> Hostile:
    """Nested arrays deeper than msgpack's unpacker allows (1024), written by hand (``packb``
    refuses them too)."""
    head = msgpack.packb(f.body(), use_bin_type=True)
    depth = f.rng.choice([1100, 5000, 100_000])
    raw = bytes([head[0] + 1]) + head[1:] + msgpack.packb("deep") + b"\x91" * depth + b"\x90"
    return f.dead(kind, raw, "undecodable")


def _invalid_utf8(f: Fuzzer, kind: str) -> Hostile:
    bad = f.rng.choice([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"ok\x80"])
    raw = b"\x82" + msgpack.packb("id") + bytes([0xA0 | len(bad)]) + bad + msgpack.packb("reply_to") \
        + msgpack.packb(f.reply_to)
    return f.dead(kind, raw, "undecodable")


def _non_str_keys(f: Fuzzer, kind: str) -> Hostile:
    b = f.body()
    key: Any = f.rng.choice([1, -7, 2.5, None])
    raw = msgpack.packb({**b, key: "x"}, use_bin_type=True)
    return f.dead(kind, raw, "undecodable")


def _huge_string_beyond(f: Fuzzer, kind: str) -> Hostile:
    """A string over the unpacker's 1 MiB, in a job that is otherwise fine: nothing addressable."""
    b = f.body()
    b["app"] = "a" * ((1 << 20) + f.rng.randint(1, 4096))
    return f.dead(kind, msgpack.packb(b, use_bin_type=True))


def _no_m_field(f: Fuzzer, kind: str) -> Hostile:
    name = f.rng.choice([b"x", b"M", b"job", b"m "])
    return Hostile(kind, {name: msgpack.packb(f.body(), use_bin_type=True)}, "", 0, "undecodable")


def _bad_id(f: Fuzzer, kind: str) -> Hostile:
    b = f.body()
    b["id"] = f.rng.choice([f.rng.choice(_UNICODE) + str(f.n), "x" * f.rng.randint(129, 5000), "", 17, None,
                            [b.get("id")], {"id": "x"}])
    if f.rng.random() < 0.3:
        del b["id"]
    return f.packed(kind, b)


def _bad_reply_to(f: Fuzzer, kind: str) -> Hostile:
    b = f.body()
    b["reply_to"] = f.rng.choice([f.rng.choice(_UNICODE), "r" * f.rng.randint(129, 3000), "", 5, None,
                                  ["x"], "a b", "{ns}:x"])
    if f.rng.random() < 0.3:
        del b["reply_to"]
    return f.packed(kind, b)


# -- the kinds the planner can answer: a rejected result per request -------------------------------

def _huge_map(f: Fuzzer, kind: str) -> Hostile:
    """More keys than the unpacker takes (max_requests_per_job + 64): undecodable, yet its id
    and reply channel can still be read."""
    b = f.body()
    extra = max(f.limits.max_requests_per_job + 64, 256) + f.rng.randint(1, 2000)
    return f.packed(kind, {**b, **{f"k{i}": i for i in range(extra)}}, "undecodable")


def _huge_map_within(f: Fuzzer, kind: str) -> Hostile:
    b = f.body()
    where = f.rng.choice(["job", "slo", "request", "tensor"])
    target = {"job": b, "slo": b["slo"], "request": b["requests"][0],
              "tensor": next(iter(b["requests"][0]["inputs"].values()))}[where]
    target.update({f"x{i}": i for i in range(f.rng.randint(1, 200))})
    return f.packed(kind, b, "schema")


def _deep_nesting(f: Fuzzer, kind: str) -> Hostile:
    b, req, t = f.one_request()
    value: Any = []
    for _ in range(f.rng.randint(10, 900)):
        value = [value]
    where = f.rng.choice(["extra", "shape", "inputs", "slo"])
    if where == "extra":
        b["nested"] = value
    elif where == "shape":
        t["shape"] = value
    elif where == "inputs":
        req["inputs"] = value
    else:
        b["slo"] = {"deadline_ms": value}
    return f.packed(kind, b, "schema")


def _huge_string(f: Fuzzer, kind: str) -> Hostile:
    b, req, t = f.one_request()
    s = f.text(f.rng.randint(65, 60_000))
    field = f.rng.choice(["app", "model", "run", "dtype", "objective", "kind"])
    if field == "dtype":
        t["dtype"] = s
    elif field == "objective":
        b["slo"]["objective"] = s
    elif field == "kind":
        req["kind"] = s
    else:
        b[field] = s
    return f.packed(kind, b, "schema")


def _over_byte_limit(f: Fuzzer, kind: str) -> Hostile:
    """One input whose bytes alone pass the message limit."""
    b, _, t = f.one_request()
    n = f.limits.max_message_bytes // 4 + f.rng.randint(1, 256)
    t.update({"dtype": "float32", "shape": [n], "data": bytes(4 * n)})
    return f.packed(kind, b, "limit")


def _wrong_type(f: Fuzzer, kind: str) -> Hostile:
    b, req, t = f.one_request()
    junk = f.rng.choice([[1, 2], {"a": 1}, "soon", None, b"\x00\x01"])
    where = f.rng.choice(["model", "requests", "slo", "deadline", "accuracy", "objective", "priority", "inputs",
                          "dtype", "shape", "data", "kind", "generation", "request", "app"])
    if where in ("model", "app"):
        b[where] = f.rng.choice([7, [b[where]], None, {"n": 1}])
    elif where == "requests":
        b["requests"] = f.rng.choice([req, "r0", 3, None])
    elif where == "slo":
        b["slo"] = f.rng.choice(["fast", 100, [100], None])
    elif where == "deadline":
        b["slo"]["deadline_ms"] = junk
    elif where == "accuracy":
        b["slo"]["min_accuracy"] = f.rng.choice(["high", [0.5], None, {"v": 1}])
    elif where == "objective":
        b["slo"]["objective"] = f.rng.choice([1, "fastest", None, ["latency"]])
    elif where == "priority":
        b["priority"] = f.rng.choice(["urgent", [1], 1.5, None])
    elif where == "inputs":
        req["inputs"] = f.rng.choice([[t], "audio", 5, None])
    elif where == "dtype":
        t["dtype"] = f.rng.choice([32, None, ["float32"], {"t": "f"}])
    elif where == "shape":
        t["shape"] = f.rng.choice(["1,32,32", 1024, None, [1.5, 2.5], [[1], [2]], {"0": 1}, ["1", "x"]])
    elif where == "data":
        t["data"] = f.rng.choice([12345, None, [1, 2, 3], {"b": 1}, 2.5])
    elif where == "kind":
        req["kind"] = f.rng.choice(["backward", 1, None])
    elif where == "generation":
        req["generation"] = f.rng.choice(["greedy", 5, [1]])
    else:
        b["requests"][0] = f.rng.choice(["r0", 5, None, [req]])
    return f.packed(kind, b, "schema")


def _missing_field(f: Fuzzer, kind: str) -> Hostile:
    b, req, t = f.one_request()
    where = f.rng.choice(["model", "requests", "slo", "v", "type", "deadline_ms", "inputs", "dtype", "shape",
                          "data", "request_id"])
    if where in ("model", "requests", "slo", "v", "type"):
        del b[where]
    elif where == "deadline_ms":
        del b["slo"]["deadline_ms"]
    elif where in ("dtype", "shape", "data"):
        del t[where]
    elif where == "inputs":
        del req["inputs"]
    else:
        del req["id"]
    return f.packed(kind, b, "version" if where == "v" else "schema")


def _extra_field(f: Fuzzer, kind: str) -> Hostile:
    b, req, t = f.one_request()
    target = f.rng.choice([b, b["slo"], req, t])
    target[f.rng.choice(["extra", "ID", "m", "__proto__", "pickle", "callback"])] = f.rng.choice([1, "x", None, [1]])
    return f.packed(kind, b, "schema")


def _bad_shape(f: Fuzzer, kind: str) -> Hostile:
    b, _, t = f.one_request()
    spec = list(t["shape"])
    choice = f.rng.choice(["negative", "zero", "enormous", "huge_int", "rank", "scalar"])
    if choice == "negative":
        spec[f.rng.randrange(len(spec))] *= -1
        t["shape"] = [d if d else -1 for d in spec]
    elif choice == "zero":
        spec[f.rng.randrange(len(spec))] = 0
        t.update({"shape": spec, "data": b""})
    elif choice == "enormous":
        t["shape"] = [2**31, 2**31, *spec]
    elif choice == "huge_int":
        t["shape"] = [f.rng.choice([2**63 - 1, 2**64 - 1, -(2**63)])]
    elif choice == "rank":
        t["shape"] = [1] * f.rng.randint(9, 40) + spec
    else:
        t.update({"shape": [], "data": t["data"][:4]})
    return f.packed(kind, b)


def _size_mismatch(f: Fuzzer, kind: str) -> Hostile:
    b, _, t = f.one_request()
    data = t["data"]
    t["data"] = f.rng.choice([data[:-f.rng.randint(1, 64)], data + bytes(f.rng.randint(1, 64)), data * 2, b""])
    return f.packed(kind, b, "schema")


def _bad_dtype(f: Fuzzer, kind: str) -> Hostile:
    b, _, t = f.one_request()
    dtype = f.rng.choice([*_BAD_DTYPES, "int64", "uint8", "bool", "int8"])
    if dtype in ("int64", "uint8", "bool", "int8"):  # known, but not what a float model takes
        t.update(f.tensor(tuple(t["shape"]), dtype))
    else:
        t["dtype"] = dtype
    return f.packed(kind, b, "schema")


def _bad_request_id(f: Fuzzer, kind: str) -> Hostile:
    b = f.body(f.rng.randint(1, 3))
    for r in b["requests"]:
        r["id"] = f.rng.choice([f.rng.choice(_UNICODE), "q" * f.rng.randint(129, 2000), ""])
    if f.rng.random() < 0.3 and len(b["requests"]) > 1:
        b["requests"][1]["id"] = "ok-id"  # one well-formed id among bad ones gets its own result
    return f.packed(kind, b, "schema")


def _non_finite(f: Fuzzer, kind: str) -> Hostile:
    b, _, t = f.one_request()
    dtype = f.rng.choice(["float32", "float16"])
    shape = tuple(t["shape"])
    arr = f.np.standard_normal(int(np.prod(shape))).astype(dtype)
    value = f.rng.choice([np.nan, np.inf, -np.inf])
    if f.rng.random() < 0.2:
        arr[:] = value  # all NaN: the preamble's "confident answer to garbage"
    else:
        arr[f.rng.randrange(arr.size)] = value
    t.update({"dtype": dtype, "data": arr.astype(np.dtype(dtype).newbyteorder("<")).tobytes()})
    return f.packed(kind, b, "non_finite")


def _unknown_model(f: Fuzzer, kind: str) -> Hostile:
    b = f.body(f.rng.randint(1, 3))
    b["model"] = f"no-such-model-{f.rng.randint(0, 10**6)}"
    return f.packed(kind, b, "unknown_model")


def _bad_deadline(f: Fuzzer, kind: str) -> Hostile:
    b = f.body()
    b["slo"]["deadline_ms"] = f.rng.choice([0.0, -5.0, 0.5, 1e12, float("nan"), float("inf"), float("-inf"),
                                            f.limits.max_deadline_ms * 2, -(2**63)])
    return f.packed(kind, b, "limit")


def _out_of_range(f: Fuzzer, kind: str) -> Hostile:
    b, req, _ = f.one_request()
    where = f.rng.choice(["accuracy", "priority", "version", "type", "generate", "generation", "empty_requests",
                          "empty_inputs", "modalities", "duplicate_ids"])
    reason = "schema"
    if where == "accuracy":
        b["slo"]["min_accuracy"] = f.rng.choice([-0.1, 1.5, float("nan"), float("inf")])
    elif where == "priority":
        b["priority"] = f.rng.choice([-1, 10, 2**63 - 1, -(2**63)])
    elif where == "version":
        b["v"], reason = f.rng.choice([0, 2, -1, 2**32, "1"]), "version"
    elif where == "type":
        b["type"] = f.rng.choice(["batch", "result", "event", "JOB", ""])
    elif where == "generate":
        req["kind"], reason = "generate", "unsupported"
    elif where == "generation":
        req["generation"] = {"max_new_tokens": f.rng.choice([0, -1, 10**6])}
    elif where == "empty_requests":
        b["requests"] = []
    elif where == "empty_inputs":
        req["inputs"] = {}
    elif where == "modalities":
        req["inputs"] = {f"m{i}": f.tensor() for i in range(f.limits.max_modalities + 1)}
        reason = "limit"
    else:
        b["requests"] = [req, dict(req)]
    return f.packed(kind, b, reason)


def _too_many_requests(f: Fuzzer, kind: str) -> Hostile:
    b = f.body()
    one = {"dtype": "float32", "shape": [1], "data": bytes(4)}
    n = f.limits.max_requests_per_job + f.rng.randint(1, 32)
    b["requests"] = [{"id": f"r{i}", "inputs": {next(iter(f.inputs)): one}} for i in range(n)]
    return f.packed(kind, b, "limit")


def _ext_type(f: Fuzzer, kind: str) -> Hostile:
    b = f.body()
    b["extra"] = msgpack.ExtType(f.rng.randint(0, 127), f.rng.randbytes(f.rng.randint(1, 16)))
    return f.packed(kind, b, "undecodable")


# name -> (weight, generator): the heavy kinds (a megabyte, a thousand results) are rare.
KINDS: dict[str, tuple[float, Callable[[Fuzzer, str], Hostile]]] = {
    "random_bytes": (1.0, _random_bytes),
    "truncated": (1.0, _truncated),
    "not_a_map": (0.5, _not_a_map),
    "deep_nesting_beyond": (0.3, _deep_beyond),
    "invalid_utf8": (0.5, _invalid_utf8),
    "non_str_keys": (0.5, _non_str_keys),
    "huge_string_beyond": (0.01, _huge_string_beyond),
    "no_m_field": (0.3, _no_m_field),
    "bad_id": (1.0, _bad_id),
    "bad_reply_to": (1.0, _bad_reply_to),
    "huge_map": (0.05, _huge_map),
    "huge_map_within": (0.5, _huge_map_within),
    "deep_nesting": (0.5, _deep_nesting),
    "huge_string": (0.5, _huge_string),
    "over_byte_limit": (0.01, _over_byte_limit),
    "wrong_type": (2.0, _wrong_type),
    "missing_field": (1.0, _missing_field),
    "extra_field": (1.0, _extra_field),
    "bad_shape": (1.0, _bad_shape),
    "size_mismatch": (1.0, _size_mismatch),
    "bad_dtype": (1.0, _bad_dtype),
    "bad_request_id": (1.0, _bad_request_id),
    "non_finite": (1.5, _non_finite),
    "unknown_model": (1.0, _unknown_model),
    "bad_deadline": (1.0, _bad_deadline),
    "out_of_range": (1.5, _out_of_range),
    "too_many_requests": (0.01, _too_many_requests),
    "ext_type": (0.3, _ext_type),
}
