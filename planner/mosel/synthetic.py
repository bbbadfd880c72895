"""A SYNTHETIC av-digits profile, for building and testing before a measured one exists.

The figures are stand-ins, not measurements: accuracy image 0.62, audio 0.85, both 0.96, and an
audio encoder about 33 times as costly per request as the image encoder, with a small fixed cost
per batch. ``host["synthetic"] = "true"`` marks the profile so that no report mistakes it for a
measurement.
"""

from __future__ import annotations

from adaserve.broker.profiles import LatencyPoint, Profile, QualityPoint

SYNTHETIC_ACCURACY = {"image": 0.62, "audio": 0.85, "audio+image": 0.96}
# (fixed ms per batch, ms per request): audio per request = 33 x image per request.
SYNTHETIC_COST_MS = {"image": (0.05, 0.03), "audio": (0.05, 0.99), "audio+image": (0.06, 1.02)}


def is_synthetic(profile: Profile) -> bool:
    return profile.host.get("synthetic") == "true"


def synthetic_av_digits_profile(max_batch: int = 32, device: str = "cpu") -> Profile:
    """The stand-in profile: batch sizes 1..``max_batch`` on ``device``."""
    latency = []
    for variant, (fixed, per) in SYNTHETIC_COST_MS.items():
        for b in range(1, max_batch + 1):
            ms = fixed + per * b
            latency.append(LatencyPoint(variant=variant, device=device, batch_size=b, p50_ms=ms,
                                        p90_ms=ms * 1.1, mean_ms=ms, repeats=1))
    quality = [QualityPoint(variant=v, metric="accuracy", value=a, n=1)
               for v, a in SYNTHETIC_ACCURACY.items()]
    return Profile(model="av-digits", created_ms=0.0,
                   host={"synthetic": "true", "note": "stand-in figures, not a measurement"},
                   latency=latency, quality=quality)
