"""The published Harness-S objective on plain tensors.

Token-level clipped surrogate with asymmetric clipping (eps_low 0.20, eps_high 0.28), no KL term, and a
detached correction w = clip(pi_old / q, 0, 2) for the rollout engine's probability q differing from
the trainer's. The caller passes per-token log-probabilities computed in the context the trajectory was
generated in (its own harness's prompt and tools) and a loss mask that is 1 only on the policy's own
tokens: harness-injected text and tool observations are 0 there, so they carry no loss."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

EPS_LOW = 0.20
EPS_HIGH = 0.28
CORRECTION_CAP = 2.0


class ObjectiveConfig(BaseModel):
    eps_low: float = EPS_LOW
    eps_high: float = EPS_HIGH
    correction_cap: float = CORRECTION_CAP


def rollout_correction(old_logps: Any, rollout_logps: Any | None, cap: float = CORRECTION_CAP) -> Any:
    """w = clip(pi_old / q, 0, cap), detached; 1 where the rollout engine is the trainer (q is None)."""
    import torch

    if rollout_logps is None:
        return torch.ones_like(old_logps)
    ratio = torch.exp(old_logps.detach() - rollout_logps.detach())
    return torch.nan_to_num(ratio, nan=1.0).clamp(0.0, cap)


def surrogate_loss(logps: Any, old_logps: Any, advantages: Any, mask: Any, rollout_logps: Any | None = None,
                   config: ObjectiveConfig | None = None) -> tuple[Any, dict[str, float]]:
    """Mean over masked tokens of -w * min(r A, clip(r, 1 - eps_low, 1 + eps_high) A), r = pi / pi_old.

    Shapes: logps, old_logps, rollout_logps and mask (B, T); advantages (B,). Returns the loss and
    the share of masked tokens whose ratio was clipped plus the mean correction, for logging."""
    import torch

    c = config or ObjectiveConfig()
    mask = mask.to(logps.dtype)
    adv = advantages.to(logps.dtype).unsqueeze(-1)
    ratio = torch.exp(logps - old_logps.detach())
    clipped = ratio.clamp(1.0 - c.eps_low, 1.0 + c.eps_high)
    per_token = -torch.minimum(ratio * adv, clipped * adv)
    weight = rollout_correction(old_logps, rollout_logps, c.correction_cap)
    per_token = per_token * weight
    tokens = mask.sum().clamp(min=1.0)
    loss = (per_token * mask).sum() / tokens
    was_clipped = ((ratio < 1.0 - c.eps_low) & (adv < 0)) | ((ratio > 1.0 + c.eps_high) & (adv > 0))
    stats = {
        "clip_fraction": float((was_clipped.to(mask.dtype) * mask).sum() / tokens),
        "correction_mean": float((weight * mask).sum() / tokens),
    }
    return loss, stats
