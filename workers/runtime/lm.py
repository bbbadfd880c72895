"""Serving an early-exit GPT loaded only up to one depth (the ``lm-exit`` variants).

Input contract (one batch, stacked along axis 0):

* ``tokens``: int64 [B, P], character ids of the prompts, **right-aligned** (the last column is
  every prompt's last character) and **left-padded** with ``pad_id`` (-1, from the variant's
  ``extra``). A prompt longer than ``block_size - its max_new_tokens`` keeps its most recent tokens.
* ``max_new_tokens`` (optional): int64 [B] or [B, 1], tokens to generate per request; default the
  variant's ``extra["max_new_tokens"]``. The batch generates up to its largest value.
* ``temperature`` (optional): float [B], 0 = greedy; ``seed`` (optional): int [B], the seed of
  each sampling row's generator (see ``sampling``).
* ``tau`` (optional): float [B] or a scalar, the confidence threshold of the exits; default the
  variant's ``extra["tau"]`` (0.8 when it has none). NaN in a row means that default.

Generation is in lockstep: every token of every request leaves at the loaded depth, so there is
no per-token synchronisation (as in HELIOS). The ``early-exit`` variant (``extra["early_exit"]``,
all layers loaded) is the static EE-LLM-style baseline instead: each token leaves at its first exit
whose top-1 probability is >= tau, and a skipped layer's keys and values for that position come from
the exit's hidden state copied upward (CALM's choice; see ``gpt.EarlyExitGpt.step_exits``); the
batch steps as long as its deepest token needs. Positions count each prompt's real tokens only, so a
request's only budget is its own ``prompt + max_new_tokens <= block_size``, whatever its batch-mates
ask for. Outputs:

* ``outputs["tokens"]``: int64 [B, N] generated ids, ``pad_id`` after a request's own count;
* ``outputs["confidence"]``: float32 [B, N], the model's softmax probability of each generated
  token (the top-1 probability when greedy), NaN where padded. A planner counts confidence
  breaches (tokens below its threshold) from these;
* ``confidences``: float32 [B], the mean per-token confidence of each request;
* ``outputs["exit_at_tau"]``: int64 [B, N], per generated token the first exit (1..loaded
  depth) whose top-1 probability is >= tau, 0 when none was (a confidence breach at this depth),
  -1 where padded. Every exit head up to the loaded depth is read for it (a few kilobytes each);
* ``outputs["prompt_ppl"]``: float32 [B], the perplexity of each prompt under the loaded depth,
  from the prefill logits the model computes anyway (NaN for a one-token prompt: nothing to score);
* ``outputs["exits"]`` (``early-exit`` only): int64 [B, N], the exit each token actually left at;
* ``exits``: int64 [B], the loaded depth (the deepest a token can leave at);
  ``request_exec_s``: the batch time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from adaserve.broker.errors import InvalidArgument, InvalidMessage, ModelLoadError
from adaserve.models.lm.weights import load_depth
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo
from adaserve.workers.runtime.base import GenerativeRunner, RunOutput
from adaserve.workers.runtime.sampling import Samplers

DEFAULT_MAX_NEW = 16
DEFAULT_TAU = 0.8


@dataclass
class Generation:
    """What one generation pass produced, per row and generated token ([B, n] unless noted)."""

    ids: np.ndarray
    conf: np.ndarray
    exit_at_tau: np.ndarray
    exits: np.ndarray  # the exit each token left at (the loaded depth unless early exit)
    prompt_ppl: np.ndarray  # [B]


def torch_device(device: str) -> torch.device:
    if device == "gpu":
        if not torch.cuda.is_available():
            raise ModelLoadError("device 'gpu' asked for, but torch sees no CUDA device")
        return torch.device("cuda")
    if device != "cpu":
        raise InvalidArgument(f"device must be 'cpu' or 'gpu', got {device!r}")
    return torch.device("cpu")


class LmRunner(GenerativeRunner):
    """Greedy generation with the first ``extra["depth"]`` blocks; nothing deeper is read."""

    def __init__(self, model_dir: Path, info: ModelInfo, variant: VariantInfo, device: str,
                 threads: int | None = None) -> None:
        if variant.kind != "lm-exit" or "depth" not in variant.extra:
            raise ValueError(f"{info.name}/{variant.name} is not an lm-exit variant with a depth")
        self.model, self.variant, self.device = info.name, variant.name, device
        self.inputs: tuple[str, ...] = tuple(variant.inputs)
        self.depth = int(variant.extra["depth"])
        self.pad_id = int(variant.extra.get("pad_id", -1))
        self.max_new_tokens = int(variant.extra.get("max_new_tokens", DEFAULT_MAX_NEW))
        self.tau = float(variant.extra.get("tau", DEFAULT_TAU))
        self.early_exit = bool(variant.extra.get("early_exit", False))
        self._dev = torch_device(device)
        # torch's thread count is per process. These models are tiny: one intra-op thread is the
        # fastest, and more threads spin-wait badly when the cores are shared (30x slower measured).
        torch.set_num_threads(threads or 1)
        t0 = time.perf_counter()
        net, self.loaded_files = load_depth(Path(model_dir), self.depth)
        self.net = net.to(self._dev)
        self.load_s = time.perf_counter() - t0  # reading and placing this depth's layers
        self.exit_depths: tuple[int, ...] = net.exit_depths
        self.block_size = self.net.config.block_size
        self.vocab_size = self.net.config.vocab_size
        # A prompt is any number of tokens (the manifest's length is only what samples use).
        # ``tau`` is optional: a request (or a planner on its behalf) may name its own threshold.
        self.specs = {"tokens": InputSpec(shape=(-1,), dtype="int64"),
                      "tau": InputSpec(shape=(1,), dtype="float32")}

    @property
    def input_limits(self) -> dict[str, dict[str, int]]:
        """What the planner checks a prompt against before it can share a batch (heartbeat)."""
        return {"tokens": {"max_length": self.block_size - 1, "context": self.block_size,
                           "max_new_tokens": self.block_size - 1, "default_new_tokens": self.max_new_tokens,
                           "vocab_size": self.vocab_size, "pad_id": self.pad_id}}

    @property
    def parameters(self) -> int:
        """Parameters held in memory: grows with the loaded depth."""
        return sum(p.numel() for p in self.net.parameters())

    @property
    def weight_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.net.parameters())

    @property
    def kv_bytes_per_token(self) -> int:
        """Keys and values one token of one sequence holds at the loaded depth (float32)."""
        return kv_bytes_per_token(self.net.config.n_embd, self.depth)

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        if "tokens" not in inputs:
            raise InvalidMessage("schema", f"{self.model}/{self.variant} needs input 'tokens'")
        tokens = np.asarray(inputs["tokens"])
        if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
            raise InvalidMessage("schema", f"'tokens' must be integer [batch, length], got "
                                           f"{tokens.dtype} {tokens.shape}")
        b = tokens.shape[0]
        wanted = self._wanted(inputs.get("max_new_tokens"), b)
        temperature = self._per_row(inputs.get("temperature"), b, "temperature", np.float64)
        if temperature is not None and (~np.isfinite(temperature) | (temperature < 0)).any():
            raise InvalidMessage("schema", "'temperature' must be finite and >= 0")
        seeds = self._per_row(inputs.get("seed"), b, "seed", np.uint64)
        tau = self._tau(inputs.get("tau"), b)
        n = int(wanted.max()) if b else 0
        t0 = time.perf_counter()
        g = self.decode(tokens, n, wanted=wanted, temperature=temperature, seeds=seeds, tau=tau)
        elapsed = time.perf_counter() - t0
        keep = np.arange(n)[None, :] < wanted[:, None]
        ids = np.where(keep, g.ids, self.pad_id)
        conf = np.where(keep, g.conf, np.nan).astype(np.float32)
        counts = keep.sum(axis=1)
        mean = np.where(counts > 0, np.nansum(conf, axis=1) / np.maximum(counts, 1), np.nan)
        outputs = {"tokens": ids, "confidence": conf,
                   "exit_at_tau": np.where(keep, g.exit_at_tau, -1).astype(np.int64),
                   "prompt_ppl": g.prompt_ppl.astype(np.float32)}
        if self.early_exit:
            outputs["exits"] = np.where(keep, g.exits, -1).astype(np.int64)
        return RunOutput(outputs=outputs,
                         confidences=mean.astype(np.float32),
                         exits=np.full(b, self.depth, dtype=np.int64),
                         request_exec_s=np.full(b, elapsed, dtype=np.float64))

    def _wanted(self, raw: np.ndarray | None, b: int) -> np.ndarray:
        if raw is None:
            return np.full(b, self.max_new_tokens, dtype=np.int64)
        wanted = np.asarray(raw).astype(np.int64).reshape(-1)
        if wanted.size != b or (wanted < 0).any() or (wanted > self.block_size - 1).any():
            raise InvalidMessage("schema", f"'max_new_tokens' must hold {b} values in "
                                           f"0..{self.block_size - 1}")
        return wanted

    def _tau(self, raw: np.ndarray | None, b: int) -> np.ndarray:
        if raw is None:
            return np.full(b, self.tau, dtype=np.float64)
        a = np.asarray(raw, dtype=np.float64).reshape(-1)
        if a.size == 1:
            a = np.full(b, a[0])
        if a.size != b:
            raise InvalidMessage("schema", f"'tau' must be a scalar or hold {b} values, got {a.size}")
        a = np.where(np.isnan(a), self.tau, a)
        if ((a < 0) | (a > 1)).any():
            raise InvalidMessage("schema", "'tau' must lie in 0..1")
        return a

    @staticmethod
    def _per_row(raw: np.ndarray | None, b: int, name: str, dtype: type) -> np.ndarray | None:
        if raw is None:
            return None
        a = np.asarray(raw).reshape(-1)
        if a.size != b:
            raise InvalidMessage("schema", f"'{name}' must hold {b} values, got {a.size}")
        return a.astype(dtype)

    def generate(self, tokens: np.ndarray, n: int, *, wanted: np.ndarray | None = None,
                 temperature: np.ndarray | None = None, seeds: np.ndarray | None = None,
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Generated ids and their confidences, both [B, n], for right-aligned padded prompts."""
        g = self.decode(tokens, n, wanted=wanted, temperature=temperature, seeds=seeds)
        return g.ids, g.conf

    @torch.inference_mode()
    def decode(self, tokens: np.ndarray, n: int, *, wanted: np.ndarray | None = None,
               temperature: np.ndarray | None = None, seeds: np.ndarray | None = None,
               tau: np.ndarray | None = None) -> Generation:
        """Generate ``n`` tokens per row, with every exit's verdict on each of them.

        ``wanted`` [B] is each row's own count (default ``n`` for every row): a row's prompt is cut
        to its last ``block_size - wanted`` tokens, and after its count it runs on at a clamped
        position whose output is discarded, so a long prompt fits beside a long generation.
        """
        b = tokens.shape[0]
        tau = np.full(b, self.tau) if tau is None else np.asarray(tau, np.float64)
        if n == 0 or b == 0:
            empty = np.zeros((b, n), np.int64)
            return Generation(empty, np.zeros((b, n), np.float32), empty, empty,
                              np.full(b, np.nan, np.float32))
        if n > self.block_size - 1:
            raise InvalidMessage("schema", f"at most {self.block_size - 1} new tokens fit this model, "
                                           f"asked for {n}")
        wanted = np.full(b, n, np.int64) if wanted is None else np.minimum(wanted, n)
        tokens = _fit(np.asarray(tokens, np.int64), self.block_size - np.maximum(wanted, 1), self.pad_id)
        valid_np = tokens != self.pad_id
        if not valid_np[:, -1].all():
            raise InvalidMessage("schema", "every prompt needs at least one token, right-aligned "
                                           "(its last column may not be padding)")
        if ((tokens < 0) & valid_np).any() or (tokens >= self.vocab_size).any():
            raise InvalidMessage("schema", f"token ids must lie in 0..{self.vocab_size - 1} "
                                           "(or be padding)")
        sampler = Samplers.maybe(temperature, seeds, b)
        idx = torch.from_numpy(np.where(valid_np, tokens, 0).astype(np.int64)).to(self._dev)
        valid = torch.from_numpy(valid_np).to(self._dev)
        tau_t = torch.from_numpy(tau.astype(np.float32)).to(self._dev)
        early = tau_t if self.early_exit else None
        # Generated positions are never padding: without padded prompt columns no step needs a mask.
        padded = not valid_np.all()
        logits, cache, pos, full = self.net.prefill_exits(idx, valid)
        ppl = _prompt_ppl(full, idx, valid)
        last = torch.full_like(pos, self.block_size - 1)
        ones = torch.ones(b, 1, dtype=torch.bool, device=self._dev)
        out_ids, out_conf, out_tops, out_hit, out_exit = [], [], [], [], []
        top1: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for step in range(n):
            if self.early_exit:
                hit, left, probs, conf, nxt, pick = self._early_verdict(logits, tau_t, top1)
                out_hit.append(hit)
                out_exit.append(left)
            else:
                # Lockstep: the token comes from the loaded depth; every exit's top-1 probability
                # is kept and judged against tau once, after the loop.
                probs = torch.softmax(torch.stack([logits[d] for d in self.exit_depths]).float(), -1)
                tops, top_i = probs.max(-1)  # [E, B]
                out_tops.append(tops)
                conf, nxt, pick = tops[-1], top_i[-1], None
            if sampler is not None:
                stacked = torch.stack([logits[d] for d in sorted(logits)])
                if probs is None:
                    probs = torch.softmax(stacked.float(), -1)
                nxt = sampler.choose(_pick(stacked, pick), nxt)
                conf = _pick(probs, pick).gather(1, nxt[:, None])[:, 0]
            out_ids.append(nxt)
            out_conf.append(conf)
            if step + 1 == n:
                break
            # Rows past their own count keep running (lockstep) at the last position; only rows
            # still within prompt + wanted <= block_size produce tokens that are kept.
            pos = torch.minimum(pos + 1, last)
            if padded:
                valid = torch.cat([valid, ones], dim=1)
            top1 = {}
            logits, cache = self.net.step_exits(nxt, pos, valid if padded else None, cache, early, top1)

        def stack(xs: list[torch.Tensor]) -> np.ndarray:
            return torch.stack(xs, 1).cpu().numpy()

        if self.early_exit:
            hits, exits = stack(out_hit), stack(out_exit)
        else:
            hits = self._first_confident(torch.stack(out_tops, 2), tau_t).cpu().numpy()
            exits = np.full((b, len(out_ids)), self.depth)
        return Generation(stack(out_ids).astype(np.int64), stack(out_conf).astype(np.float32),
                          hits.astype(np.int64), exits.astype(np.int64),
                          ppl.cpu().numpy().astype(np.float32))

    @torch.inference_mode()
    def score(self, tokens: np.ndarray) -> np.ndarray:
        """Each prompt's perplexity at the loaded depth from one prefill, nothing generated
        (HELIOS's scoring pass: another candidate reads the prompts a batch served, so that the
        candidates are compared on the same prompts). ``tokens`` as ``run`` takes them; float32
        [B], NaN for a one-token prompt."""
        tokens = _fit(np.asarray(tokens, np.int64), np.full(len(tokens), self.block_size), self.pad_id)
        valid_np = tokens != self.pad_id
        if ((tokens < 0) & valid_np).any() or (tokens >= self.vocab_size).any():
            raise InvalidMessage("schema", f"token ids must lie in 0..{self.vocab_size - 1} (or be padding)")
        idx = torch.from_numpy(np.where(valid_np, tokens, 0)).to(self._dev)
        valid = torch.from_numpy(valid_np).to(self._dev)
        return _prompt_ppl(self.net.prompt_logits(idx, valid), idx, valid).cpu().numpy().astype(np.float32)

    def _first_confident(self, tops: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """Per row and token, the first exit whose top-1 probability is >= tau (0: none), from
        ``tops`` [E, B, ...] over the exits in ``self.exit_depths`` order; [B, ...]."""
        ok = tops >= tau.view(1, -1, *([1] * (tops.dim() - 2)))
        table = torch.tensor(self.exit_depths[:tops.shape[0]], dtype=torch.long, device=tops.device)
        return torch.where(ok.any(0), table[ok.int().argmax(0)], 0)

    def _early_verdict(self, logits: dict[int, torch.Tensor], tau: torch.Tensor,
                       top1: dict[int, tuple[torch.Tensor, torch.Tensor]]
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor,
                                  torch.Tensor]:
        """Per-token early exit: per row the first exit confident at tau (0: none), the exit the
        token leaves at (that one, else the deepest computed), the probabilities [E, B, V] of
        the exits computed (None when the step's ``top1`` already held every exit's top-1), and
        the chosen exit's top-1 probability, token and index."""
        depths = sorted(logits)
        probs = None
        if all(d in top1 for d in depths):
            tops, top_i = (torch.stack(z) for z in zip(*(top1[d] for d in depths)))  # [E, B]
        else:
            probs = torch.softmax(torch.stack([logits[d] for d in depths]).float(), -1)
            tops, top_i = probs.max(-1)
        ok = tops >= tau[None, :]
        any_ok = ok.any(0)
        first = ok.int().argmax(0)
        table = torch.tensor(depths, dtype=torch.long, device=tops.device)
        hit = torch.where(any_ok, table[first], 0)
        left = torch.where(any_ok, hit, depths[-1])
        pick = torch.where(any_ok, first, len(depths) - 1)
        return hit, left, probs, tops.gather(0, pick[None])[0], top_i.gather(0, pick[None])[0], pick

    @torch.no_grad()
    def perplexity(self, ids: np.ndarray, max_windows: int | None = None) -> tuple[float, int]:
        """Perplexity of the loaded depth on a token sequence (non-overlapping windows), and its tokens."""
        from adaserve.models.lm.train import windows

        x, y = windows(np.asarray(ids, dtype=np.int64), self.block_size, max_windows)
        nll = 0.0
        for i in range(0, len(x), 64):
            xb = torch.from_numpy(x[i:i + 64]).to(self._dev)
            yb = torch.from_numpy(y[i:i + 64]).to(self._dev)
            logp = torch.log_softmax(self.net.train_logits(xb)[-1].float(), dim=-1)
            nll += float(-logp.gather(-1, yb[..., None]).sum())
        return float(np.exp(nll / x.size)), int(x.size)


def kv_bytes_per_token(n_embd: int, depth: int, itemsize: int = 4) -> int:
    """Cache bytes one token of one sequence holds: a key and a value of ``n_embd`` per layer."""
    return 2 * n_embd * depth * itemsize


def _pick(stacked: torch.Tensor, pick: torch.Tensor | None) -> torch.Tensor:
    """Row b of ``stacked`` [E, B, V] at exit index ``pick[b]`` (the deepest when None): [B, V]."""
    if pick is None:
        return stacked[-1]
    return stacked.gather(0, pick[None, :, None].expand(1, *stacked.shape[1:]))[0]


def _prompt_ppl(logits: torch.Tensor, idx: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per row, exp of the mean NLL of each real prompt token after the first, from the prefill's
    logits [B, T, V] (NaN for a one-token prompt)."""
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    nll = -logp.gather(-1, idx[:, 1:, None])[..., 0]
    scored = (valid[:, :-1] & valid[:, 1:]).float()
    count = scored.sum(1)
    mean = (nll * scored).sum(1) / count.clamp(min=1)
    return torch.where(count > 0, mean.exp(), torch.full_like(mean, float("nan")))


def _fit(tokens: np.ndarray, room: np.ndarray, pad_id: int) -> np.ndarray:
    """Each row cut to its last ``room[i]`` columns (older tokens become padding), then the
    columns that are padding in every row dropped."""
    width = tokens.shape[1]
    cut = np.arange(width)[None, :] < (width - room)[:, None]
    if cut.any():
        tokens = np.where(cut, pad_id, tokens)
    real = (tokens != pad_id).any(axis=0)
    first = int(np.argmax(real)) if real.any() else width - 1
    return tokens[:, first:]
