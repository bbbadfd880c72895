"""A split model's build step shared by effnet-lite0 and ee-lm-s-split: export the whole network
and its two parts, then check on held-out inputs that part 2 after part 1 equals the whole and
that the intermediate may travel as float16."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from adaserve.broker.errors import BuildError
from adaserve.models.chain import export
from adaserve.models.fp16 import fp16_check
from adaserve.models.manifest import InputSpec, VariantInfo

if TYPE_CHECKING:
    import onnxruntime as ort

FILES = ("whole.onnx", "part1.onnx", "part2.onnx")


@dataclass(frozen=True)
class SplitCheck:
    whole: np.ndarray  # the exported whole model's outputs on the held-out inputs
    mid_shape: tuple[int, ...]  # the intermediate's per-sample shape
    split_diff: float  # max |part2(part1(x)) - whole(x)|
    torch_diff: float  # max |whole(x) in onnxruntime - the torch module's|
    fp16: dict[str, Any]  # fp16_check's verdict on the intermediate


def cpu_session(path: Path) -> ort.InferenceSession:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def export_and_check(whole_net: nn.Module, part1: nn.Module, part2: nn.Module, inputs: np.ndarray,
                     input_name: str, out_dir: Path, tolerance: float) -> SplitCheck:
    """``whole.onnx``, ``part1.onnx`` and ``part2.onnx`` in ``out_dir`` (traced on two of
    ``inputs``), checked on all of them; ``BuildError`` when the parts differ from the whole by
    more than ``tolerance``."""
    example = torch.from_numpy(inputs[:2])
    with torch.no_grad():
        inter = part1(example)
        ref = whole_net(torch.from_numpy(inputs)).numpy()
    out_dir.mkdir(parents=True, exist_ok=True)
    export(whole_net, example, out_dir / FILES[0], input_name, "logits")
    export(part1, example, out_dir / FILES[1], input_name, "intermediate")
    export(part2, inter, out_dir / FILES[2], "intermediate", "logits")
    whole_s, p1_s, p2_s = (cpu_session(out_dir / f) for f in FILES)
    whole = whole_s.run(None, {input_name: inputs})[0]
    mid = p1_s.run(None, {input_name: inputs})[0]
    chained = p2_s.run(None, {"intermediate": mid})[0]
    split_diff = float(np.abs(chained - whole).max())
    if split_diff > tolerance:
        raise BuildError(f"part2(part1(x)) differs from whole(x) by {split_diff:.3g} > {tolerance}")
    fp16 = fp16_check(lambda m: p2_s.run(None, {"intermediate": m})[0], mid, chained)
    return SplitCheck(whole, tuple(int(d) for d in mid.shape[1:]), split_diff, float(np.abs(whole - ref).max()), fp16)


def split_variants(check: SplitCheck, inputs: dict[str, InputSpec], accuracy: float, common: dict[str, Any],
                   out_dir: Path) -> list[VariantInfo]:
    """The ``whole``, ``part1`` and ``part2`` variants of a split model's manifest; ``common``: the
    cut's figures both parts carry. Part 1 hands its output on as float16 when the check passed."""
    mid_spec = {"intermediate": InputSpec(shape=check.mid_shape, dtype="float32")}
    sizes = {f: (out_dir / f).stat().st_size for f in FILES}
    wire = {"intermediate_dtype": "float16"} if check.fp16["ok"] else {}
    return [
        VariantInfo(name="whole", kind="whole", artifacts=["whole.onnx"], inputs=inputs,
                    metric="accuracy", quality=accuracy, extra={"bytes": sizes["whole.onnx"]}),
        VariantInfo(name="part1", kind="part", artifacts=["part1.onnx"], inputs=inputs,
                    extra={"part": 1, "next": "part2", "bytes": sizes["part1.onnx"],
                           "out_shape": list(check.mid_shape), **common, "fp16_ok": check.fp16, **wire}),
        VariantInfo(name="part2", kind="part", artifacts=["part2.onnx"], inputs=mid_spec,
                    metric="accuracy", quality=accuracy, extra={"part": 2, "bytes": sizes["part2.onnx"], **common}),
    ]
