"""A character-level GPT with an exit head after each block, loadable up to any depth.

``EarlyExitGpt(config, depth=k, exits=(k,))`` holds only the first ``k`` blocks and the exit head
at ``k``: that is what a worker loads to serve depth ``k`` (HELIOS loads a model only up to the exit
its tokens use). Training builds the full stack with every exit and averages their losses, so every
exit is a usable language model on its own.

Padding: prompts are right-aligned and left-padded; ``valid`` marks the real tokens. Positions count
real tokens only, so a padded prompt gives the same logits as the unpadded one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, cast

import torch
from torch import nn
from torch.nn import functional as F

KvCache = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class GptConfig:
    vocab_size: int
    block_size: int  # longest sequence (prompt + generated) the position table covers
    n_layer: int
    n_embd: int
    n_head: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GptConfig:
        return cls(**{k: int(d[k]) for k in ("vocab_size", "block_size", "n_layer", "n_embd", "n_head")})


class Block(nn.Module):
    """Pre-norm transformer block; attention through SDPA with an explicit boolean mask."""

    def __init__(self, c: GptConfig) -> None:
        super().__init__()
        self.n_head = c.n_head
        self.ln1 = nn.LayerNorm(c.n_embd)
        self.qkv = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.proj = nn.Linear(c.n_embd, c.n_embd)
        self.ln2 = nn.LayerNorm(c.n_embd)
        self.fc = nn.Linear(c.n_embd, 4 * c.n_embd)
        self.out = nn.Linear(4 * c.n_embd, c.n_embd)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None,
                cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        b, t, c = x.shape
        # Functional ops and one view+permute for q, k, v: the same arithmetic with a fraction of
        # the per-call overhead, which is most of a prefill's time at these sizes.
        qkv = F.linear(F.layer_norm(x, (c,), self.ln1.weight, self.ln1.bias, self.ln1.eps),
                       self.qkv.weight, self.qkv.bias)
        q, k, v = qkv.view(b, t, 3, self.n_head, c // self.n_head).permute(2, 0, 3, 1, 4).unbind(0)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + F.linear(y.transpose(1, 2).reshape(b, t, c), self.proj.weight, self.proj.bias)
        z = F.layer_norm(x, (c,), self.ln2.weight, self.ln2.bias, self.ln2.eps)
        x = x + F.linear(F.gelu(F.linear(z, self.fc.weight, self.fc.bias)), self.out.weight, self.out.bias)
        return x, (k, v)

    def step(self, x: torch.Tensor, mask: torch.Tensor | None, cache: tuple[torch.Tensor, torch.Tensor]
             ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``forward`` for one new position per row, ``x`` [B, C]; ``mask`` None when no row is padded.

        The same arithmetic as ``forward``, written with the functional ops on 2-D activations:
        at batch 1 a step's matrices are a few kilobytes and PyTorch's per-call overhead (module
        calls, 3-D matmul reshapes, split/view/transpose per head tensor, an all-true mask) was
        most of its time.
        """
        b, c = x.shape
        h = self.n_head
        qkv = F.linear(F.layer_norm(x, (c,), self.ln1.weight, self.ln1.bias, self.ln1.eps),
                       self.qkv.weight, self.qkv.bias)
        q, k, v = qkv.view(b, 3, h, 1, c // h).unbind(1)
        k = torch.cat([cache[0], k], dim=2)
        v = torch.cat([cache[1], v], dim=2)
        # One query per row sees every cached key, so without padding no mask is needed.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + F.linear(y.reshape(b, c), self.proj.weight, self.proj.bias)
        z = F.layer_norm(x, (c,), self.ln2.weight, self.ln2.bias, self.ln2.eps)
        x = x + F.linear(F.gelu(F.linear(z, self.fc.weight, self.fc.bias)), self.out.weight, self.out.bias)
        return x, (k, v)

    def kv_step(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor]
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``kv_only`` for one new position per row, ``x`` [B, C] (as ``step``)."""
        b, c = x.shape
        kv = F.linear(F.layer_norm(x, (c,), self.ln1.weight, self.ln1.bias, self.ln1.eps),
                      self.qkv.weight[c:], self.qkv.bias[c:])
        k, v = kv.view(b, 2, self.n_head, 1, c // self.n_head).unbind(1)
        return x, (torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2))

    def kv_only(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor]
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """This layer's keys and values of ``x`` appended to ``cache``; ``x`` passes unchanged.

        The per-token early exit fills a skipped layer's cache this way, from the hidden state
        copied up from the exit (as CALM does), at the cost of one projection, not the block.
        """
        b, t, c = x.shape
        _, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (k, v))
        return x, (torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2))


class ExitHead(nn.Module):
    def __init__(self, c: GptConfig) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(c.n_embd)
        self.head = nn.Linear(c.n_embd, c.vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln(x))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """``forward`` through the functional ops (no module calls: the per-token path)."""
        ln = self.ln
        return F.linear(F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps),
                        self.head.weight, self.head.bias)


class EarlyExitGpt(nn.Module):
    """The first ``depth`` blocks of the model and the exit heads named in ``exits`` (1-based)."""

    def __init__(self, config: GptConfig, depth: int | None = None,
                 exits: tuple[int, ...] | None = None) -> None:
        super().__init__()
        depth = config.n_layer if depth is None else depth
        if not 1 <= depth <= config.n_layer:
            raise ValueError(f"depth must be in 1..{config.n_layer}, got {depth}")
        exits = tuple(range(1, depth + 1)) if exits is None else tuple(exits)
        if not exits or any(not 1 <= e <= depth for e in exits):
            raise ValueError(f"exits must lie in 1..{depth}, got {exits}")
        self.config, self.depth, self.exit_depths = config, depth, exits
        self.tok = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(depth))
        self.exits = nn.ModuleDict({str(e): ExitHead(config) for e in exits})

    def init_weights(self, generator: torch.Generator) -> None:
        """GPT-2 style init from an explicit generator, so a seed fixes every weight."""
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = residual_std if name.endswith(("proj.weight", "out.weight")) else 0.02
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=generator) * std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def train_logits(self, idx: torch.Tensor) -> list[torch.Tensor]:
        """Logits at every exit for unpadded training windows (plain causal attention)."""
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        out = []
        for i, block in enumerate(self.blocks, start=1):
            x, _ = block(x, None)
            if str(i) in self.exits:
                out.append(self.exits[str(i)](x))
        return out

    def prefill(self, idx: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, KvCache, torch.Tensor]:
        """Run padded prompts; returns (last-position logits at the deepest exit, cache, positions)."""
        x, mask, pos = self._prompt(idx, valid)
        cache: KvCache = []
        for block in self.blocks:
            x, kv = block(x, mask)
            cache.append(kv)
        return self._head(x[:, -1]), cache, pos[:, -1]

    def step(self, tok: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor,
             cache: KvCache) -> tuple[torch.Tensor, KvCache]:
        """One generated token per row: ``tok``/``pos`` are [B], ``valid`` covers cache + this token."""
        x = self.tok(tok)[:, None, :] + self.pos(pos)[:, None, :]
        mask = valid[:, None, None, :]
        new: KvCache = []
        for block, kv in zip(self.blocks, cache):
            x, kv2 = block(x, mask, kv)
            new.append(kv2)
        return self._head(x[:, -1]), new

    def prompt_logits(self, idx: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The deepest exit's logits at every position of padded prompts [B, T, V]: a prefill
        that keeps no cache and reads no other exit (a scoring pass)."""
        x, mask, _ = self._prompt(idx, valid)
        for block in self.blocks:
            x, _ = block(x, mask)
        return self._heads()[self.depth].logits(x)

    def _prompt(self, idx: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Left-padded prompts' embeddings, their causal mask over real tokens (None: no padding,
        plain causal attention), and positions."""
        t = idx.shape[1]
        if bool(valid.all()):
            # No padding: plain causal attention, the same result as the mask without building it.
            pos = torch.arange(t, device=idx.device).expand(idx.shape[0], t)
            return F.embedding(idx, self.tok.weight) + F.embedding(pos, self.pos.weight), None, pos
        pos = (valid.long().cumsum(1) - 1).clamp(min=0)
        causal = torch.ones(t, t, dtype=torch.bool, device=idx.device).tril()
        # Pad queries may see themselves: a row with no allowed key would make SDPA return NaN.
        eye = torch.eye(t, dtype=torch.bool, device=idx.device)
        mask = (causal & (valid[:, None, :] | eye))[:, None, :, :]
        return F.embedding(idx.clamp(min=0), self.tok.weight) + F.embedding(pos, self.pos.weight), mask, pos

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        return self.exits[str(self.exit_depths[-1])](h)

    def prefill_exits(self, idx: torch.Tensor, valid: torch.Tensor
                      ) -> tuple[dict[int, torch.Tensor], KvCache, torch.Tensor, torch.Tensor]:
        """Like ``prefill``, but the last position's logits at every loaded exit, and the deepest
        exit's logits at every position [B, T, V] (the prompt's own perplexity comes from them)."""
        x, mask, pos = self._prompt(idx, valid)
        cache: KvCache = []
        last: dict[int, torch.Tensor] = {}
        heads = self._heads()
        for i, block in enumerate(self.blocks, start=1):
            x, kv = block(x, mask)
            cache.append(kv)
            if i in heads and i != self.depth:
                last[i] = heads[i].logits(x[:, -1])
        full = heads[self.depth].logits(x)
        last[self.depth] = full[:, -1]
        return last, cache, pos[:, -1], full

    def step_exits(self, tok: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor | None, cache: KvCache,
                   early_tau: torch.Tensor | None = None,
                   top1: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None,
                   ) -> tuple[dict[int, torch.Tensor], KvCache]:
        """One generated token per row; the logits at every loaded exit the step computed.

        ``valid`` covers cache + this token; None when no row has padding (no mask is needed).
        With ``early_tau`` [B] (per-token early exit), a row whose top-1 probability at an exit is
        >= its tau leaves there: deeper blocks see its hidden state copied up unchanged (they only
        add its keys and values to their cache), and once every row has left, the remaining
        layers run ``kv_step`` and their exits are not computed. ``top1``, when given, receives
        each computed exit's top-1 probability and token (early exit only; the caller's verdict
        reuses them instead of a second softmax).
        """
        x = F.embedding(tok, self.tok.weight) + F.embedding(pos, self.pos.weight)
        mask = None if valid is None else valid[:, None, None, :]
        done = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device) if early_tau is not None else None
        all_done = False
        new: KvCache = []
        logits: dict[int, torch.Tensor] = {}
        heads = self._heads()
        for i, (block, kv) in enumerate(zip(self._blocks(), cache), start=1):
            if all_done:
                x, kv2 = block.kv_step(x, kv)
                new.append(kv2)
                continue
            x2, kv2 = block.step(x, mask, kv)
            x = x2 if done is None else torch.where(done[:, None], x, x2)
            new.append(kv2)
            head = heads.get(i)
            if head is not None:
                logits[i] = head.logits(x)
                if done is not None and early_tau is not None:
                    p, arg = torch.softmax(logits[i].float(), -1).max(-1)
                    if top1 is not None:
                        top1[i] = (p, arg)
                    done |= p >= early_tau
                    # Rows only leave at an exit, so whether all have left is read there alone
                    # (one host sync per exit, none after the deepest).
                    all_done = i < self.depth and bool(done.all())
        return logits, new

    def _blocks(self) -> list[Block]:
        return cast("list[Block]", list(self.blocks))

    def _heads(self) -> dict[int, ExitHead]:
        """Exit heads by depth; built per call (a module attribute cache would be a parameter
        container that state_dict and .to() must know about)."""
        return {int(k): cast("ExitHead", m) for k, m in self.exits.items()}
