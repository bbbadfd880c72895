"""Running an onnxruntime session on the GPU through IO binding, with device input buffers kept.

``session.run`` on the CUDA provider allocates a device buffer for every input on every call and
copies it in as part of the run. A worker feeds the same few shapes over and over (one per batch
size), so ``BoundSession`` keeps one device buffer per (input, shape, dtype), refills it in place
(``OrtValue.update_inplace``: one host-to-device copy, no allocation) and binds it; outputs are
produced on the device and copied back once, after the run. On the CPU provider there is nothing
to save, and ``runner_of`` returns ``session.run`` itself.

Measured on an H100 (``adaserve bench gpu``, November 2026) it does not pay for this project's
models: every call still goes host -> device -> host, and the extra Python calls (clear, refill,
bind, copy back: 0.02-0.03 ms) cost more than the allocation they save, so plain ``run`` is up to
19 % faster for the audio and digit models and level for effnet-lite0. It is therefore off unless a
worker is started with ``--io-binding`` (bigger inputs, or inputs already on the device, are
where it would win).

Not thread-safe: a runner runs one batch at a time (the worker's run thread, or the profiler).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnxruntime as ort

RunFn = Callable[[Sequence[str], Mapping[str, np.ndarray]], list[np.ndarray]]

# Device buffers kept per session: batch sizes 1..32 for a two-input model fit, and a producer
# that sends odd shapes cannot make a worker hoard GPU memory.
MAX_BUFFERS = 96


class BoundSession:
    """``run(names, feed)`` like ``InferenceSession.run``, through IO binding on ``device_type``
    (onnxruntime's name: ``cuda``; ``cpu`` works too and is how the logic is tested without a GPU)."""

    def __init__(self, session: ort.InferenceSession, device_type: str = "cuda", device_id: int = 0) -> None:
        import onnxruntime as ort

        self._ort = ort
        self.session = session
        self.device_type = device_type
        self.device_id = device_id
        self._binding = session.io_binding()
        self._buffers: OrderedDict[tuple[str, tuple[int, ...], str], Any] = OrderedDict()

    def _device_input(self, name: str, arr: np.ndarray) -> Any:
        key = (name, arr.shape, arr.dtype.str)
        buf = self._buffers.get(key)
        if buf is None:
            # On the CPU an OrtValue aliases the array it was made from, and a later refill would
            # write into the caller's batch: it gets a copy of its own (once per shape).
            buf = self._ort.OrtValue.ortvalue_from_numpy(arr.copy(), self.device_type, self.device_id)
            self._buffers[key] = buf
            if len(self._buffers) > MAX_BUFFERS:
                self._buffers.popitem(last=False)
        else:
            buf.update_inplace(arr)
            self._buffers.move_to_end(key)
        return buf

    def run(self, names: Sequence[str], feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        io = self._binding
        io.clear_binding_inputs()
        io.clear_binding_outputs()
        for name, arr in feed.items():
            io.bind_ortvalue_input(name, self._device_input(name, np.ascontiguousarray(arr)))
        for name in names:
            io.bind_output(name, self.device_type, self.device_id)
        self.session.run_with_iobinding(io)
        return list(io.copy_outputs_to_cpu())

    @property
    def buffers(self) -> int:
        """Device input buffers held now."""
        return len(self._buffers)


def runner_of(session: ort.InferenceSession, device: str, io_binding: bool = False) -> RunFn:
    """The call that runs ``session``: IO binding on the GPU when asked for, else ``run``."""
    if device == "gpu" and io_binding:
        return BoundSession(session).run
    return session.run  # the hot path: no wrapper around it
