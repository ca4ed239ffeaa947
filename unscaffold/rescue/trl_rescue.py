"""Rescue GRPO on TRL's GRPOTrainer: a subclass that adds what GRPO lacks, and nothing else.

1. After a generation batch is scored, every group whose K base rollouts all failed is handed to the
   router; the same policy samples one fresh rollout of the task under each of the K siblings it picks
   (TRL's own generation and tool loop, with the sibling as the row's named environment) and that group
   replaces the failed one (`replace_rows`). Groups with any success keep their rollouts.
2. Advantages are recomputed by the shared core (groups.py). The loss is TRL's own, set by GRPOConfig
   options (objective.py); its mask is completion_mask * tool_mask (tool observations carry none), and
   `num_items_in_batch` is recounted over the rows that now train.

TRL hooks used (private in TRL 1.16, the range pinned in pyproject): `_generate_and_score_completions`
(the rescue step: no public hook runs after scoring and before the loss) and `_env_tools` (the harnesses'
own tool schemas: TRL builds an environment's schemas from its methods' docstrings, in alphabetical
order, which a bank tool's schema or order need not match). The rewards are read through TRL's public
reward-function protocol: each function of `reward_funcs` (TRL's wrappers of the environments'
`get_reward`) is wrapped to keep what it returned for this process's rows.

With no `pick` (the `none` method) nothing is rescued: plain GRPO with the same records.
Evaluation (`model.eval()`) never rescues: it is always the base harness.

Several processes (`accelerate launch`): TRL's RepeatSampler lays each group's K rows out consecutively
over the ranks in rank order, and every rank's rewards are gathered, so every rank sees every group and
takes the same all-fail decision; the main process asks the router and broadcasts its
picks. Each rank then samples the rescue rollouts of the rows it holds (a group split over two ranks is
re-sampled on both, each its own rows), padded with repeats of its first row to one share per rank
(TRL's collectives gather equal shares), and swaps them into its own rows (`plan_rescue`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from accelerate.utils import broadcast_object_list, gather_object
from pydantic import BaseModel
from trl import GRPOTrainer

from unscaffold.rescue.groups import SUCCESS, GroupOutcome, all_fail, settle_group

LEFT_PADDED = {"prompt_ids", "prompt_mask", "token_type_ids"}
PAD_VALUES = {"prompt_ids": None, "completion_ids": None, "tool_mask": 1, "importance_sampling_ratio": 1.0}
UNSUPPORTED = ("pixel_values", "num_images", "image_grid_thw")


def _pad_to(t: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    if t.dim() < 2 or t.size(1) >= width:
        return t
    pad = torch.full((t.size(0), width - t.size(1), *t.shape[2:]), value, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


def replace_rows(base: dict[str, Any], rescue: dict[str, Any], rows: list[int], pad_token_id: int) -> dict[str, Any]:
    """`base` with `rows` taken, in order, from `rescue`; sequence tensors are re-padded to a common width."""
    for key in UNSUPPORTED:
        if key in base or key in rescue:
            raise ValueError(f"rescue does not support multimodal batches ({key})")
    out = dict(base)
    index = torch.tensor(rows, dtype=torch.long)
    for key, value in base.items():
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or key not in rescue:
            continue
        other = rescue[key]
        pad = PAD_VALUES.get(key, 0)
        pad = pad_token_id if pad is None else pad
        width = max(value.size(1), other.size(1)) if value.dim() > 1 else 0
        merged = _pad_to(value, width, pad, key in LEFT_PADDED).clone()
        merged[index.to(merged.device)] = _pad_to(other, width, pad, key in LEFT_PADDED).to(merged.dtype)
        out[key] = merged
    return out


class RescuePlan(BaseModel):
    """Which rescue rollouts each rank samples."""

    rows: list[list[int]]  # per rank: the global rows of failed groups it holds, in order
    share: int  # rollouts every rank samples (its rows, then repeats of its first row as filler)


def plan_rescue(failed: Sequence[int], k: int, local_rows: int, world: int) -> RescuePlan:
    """Row r of the global batch sits on rank r // local_rows; every rank samples as many rollouts as the
    rank holding most failed rows. TRL makes world * local_rows a multiple of K, so rank and group edges
    both fall on multiples of K / gcd(K, world), and world * share is a multiple of K as TRL's grouping of
    the gathered rewards needs."""
    rows: list[list[int]] = [[] for _ in range(world)]
    for g in failed:
        for r in range(g * k, (g + 1) * k):
            rows[r // local_rows].append(r)
    return RescuePlan(rows=rows, share=max(len(r) for r in rows))


def take_rows(batch: dict[str, Any], count: int) -> dict[str, Any]:
    """The first `count` rows of every per-row tensor of a scored batch (fillers dropped)."""
    return {key: value[:count] if isinstance(value, torch.Tensor) and value.dim() > 0 else value
            for key, value in batch.items()}


class RescueHook:
    """The unscaffold side of the rescue step: which siblings, the rows to sample, what to record."""

    def __init__(self, pick: Callable[[str, int], list[str]] | None, rescue_row: Callable[[dict[str, Any], str], dict],
                 record: Callable[[list[GroupOutcome], list[float]], None], success: float = SUCCESS,
                 spread: list[str] | None = None) -> None:
        self.pick, self.rescue_row, self.record, self.success = pick, rescue_row, record, success
        self.spread = spread  # the fixed-mixture control: rollout j of every group under spread[j]
        self.fillers = 0  # rollouts sampled only to even out the processes' shares (cost, never trained)


class RescueGRPOTrainer(GRPOTrainer):
    def __init__(self, *args: Any, rescue: RescueHook, tool_schemas: dict[str, list[dict[str, Any]]] | None = None,
                 **kwargs: Any) -> None:
        self.rescue = rescue
        super().__init__(*args, **kwargs)
        self._keep_rewards()
        if tool_schemas:
            self._render_with(tool_schemas)

    def _render_with(self, tool_schemas: dict[str, list[dict[str, Any]]]) -> None:
        """Render and parse each environment's rows with its harness's own tool schemas, in the harness's
        order (TRL lists an environment's methods alphabetically and builds their schemas from docstrings).
        Calls still go to the environment's methods; only the rendered schema is the harness's."""
        env_tools = getattr(self, "_env_tools", None)
        if not isinstance(env_tools, dict) or set(env_tools) != set(tool_schemas):
            raise RuntimeError("this TRL version keeps no per-environment tool list (`_env_tools`); rescue train "
                               "is tested with trl>=1.16,<1.17")
        for name, schemas in tool_schemas.items():
            methods = {getattr(m, "__name__", None) for m in env_tools[name]}
            names = {s["function"]["name"] for s in schemas}
            if methods != names:
                raise RuntimeError(f"environment {name}: methods {sorted(methods, key=str)} differ from its harness's "
                                   f"tools {sorted(names)}")
            env_tools[name] = list(schemas)

    def _keep_rewards(self) -> None:
        """Wrap each reward function so this process's rewards of the last scoring are kept."""
        self._local_rewards: dict[int, list[float | None]] = {}

        def keeping(index: int, func: Callable[..., list[float | None]]) -> Callable[..., list[float | None]]:
            def kept(*args: Any, **kwargs: Any) -> list[float | None]:
                self._local_rewards[index] = out = func(*args, **kwargs)
                return out

            kept.__name__ = getattr(func, "__name__", f"reward_{index}")
            return kept

        funcs: list[Callable[..., list[float | None]]] = []
        for f in self.reward_funcs:
            if isinstance(f, torch.nn.Module) or not callable(f):  # a model, or a model's name
                raise ValueError("rescue rewards come from the environments' verifiers, not from reward models")
            funcs.append(f)
        self.reward_funcs = [keeping(i, f) for i, f in enumerate(funcs)]

    def _scored_rewards(self) -> list[float]:
        """Every rank's summed rewards of the last scoring, in rank order (as TRL sums them: weighted, None as 0)."""
        weights = self.reward_weights.tolist()
        columns = [self._local_rewards[i] for i in range(len(self.reward_funcs))]
        local = [sum(w * v for w, v in zip(weights, row, strict=True) if v is not None and v == v)  # NaN: unscored
                 for row in zip(*columns, strict=True)]
        self._local_rewards = {}
        device = self.accelerator.device
        return self.accelerator.gather(torch.tensor(local, dtype=torch.float32, device=device)).tolist()

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        k, n = self.num_generations, len(inputs)
        if k is None or self.model is None:
            raise RuntimeError("rescue training needs a model and num_generations (make_trainer sets both)")
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        if self.rescue.spread and self.model.training:  # row r of the global batch is rollout r % K of its group
            spread = self.rescue.spread
            inputs = [self.rescue.rescue_row(x, spread[(rank * n + i) % k]) for i, x in enumerate(inputs)]
        out = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return out
        base = self._scored_rewards()  # every rank's rows, in rank order
        task_ids = gather_object([x["task_id"] for x in inputs]) if world > 1 else [x["task_id"] for x in inputs]
        groups = [base[i: i + k] for i in range(0, len(base), k)]
        pick = self.rescue.pick
        failed = [g for g, rewards in enumerate(groups) if pick and all_fail(rewards, self.rescue.success)]
        picks = self._picks(failed, task_ids, k)
        rescue_rewards: dict[int, list[float]] = {}
        if failed:
            plan = plan_rescue(failed, k, n, world)
            mine = plan.rows[rank]
            rows = [self.rescue.rescue_row(inputs[r - rank * n], picks[r // k][r % k]) for r in mine]
            rescued = super()._generate_and_score_completions(rows + [inputs[0]] * (plan.share - len(mine)))
            self.rescue.fillers += plan.share * world - len(failed) * k
            scored = self._scored_rewards()
            at = {r: scored[p * plan.share + j] for p, held in enumerate(plan.rows)
                  for j, r in enumerate(held)}
            rescue_rewards = {g: [at[r] for r in range(g * k, (g + 1) * k)] for g in failed}
            if mine:
                out = replace_rows(out, take_rows(rescued, len(mine)), [r - rank * n for r in mine],
                                   self._tokenizer.pad_token_id)
        outcomes = [settle_group(task_ids[g * k], rewards, rescue_rewards.get(g), picks.get(g, ()),
                                 self.rescue.success) for g, rewards in enumerate(groups)]
        advantages = [a for o in outcomes for a in o.advantages][rank * n:(rank + 1) * n]
        out["advantages"] = torch.tensor(advantages, dtype=torch.float32, device=out["completion_ids"].device)
        mask = self._loss_mask(out)
        out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()  # as TRL counts it: every rank
        row_tokens = self.accelerator.gather(mask.sum(dim=1)).tolist()
        if self.accelerator.is_main_process:
            self.rescue.record(outcomes, row_tokens)
        return out

    def _tool_call_loop(self, prompts: Any, prompt_ids: Any, completion_ids: Any, completions: Any,
                        *rest: Any) -> Any:
        """TRL's tool loop with h's rules: each reply answered whole as h answers it (`ReplyTools`), and the
        last reply's calls run as h runs them (TRL's iteration limit is the turn limit less one, so a rollout
        has as many replies as a run's turns)."""
        from unscaffold.rescue.environment import HarnessEnvironment, ReplyTools

        tools = [ReplyTools(env, completions[i]) if isinstance(env, HarnessEnvironment) else None
                 for i, env in enumerate(getattr(self, "environments", None) or [])]
        if tools and all(t is not None for t in tools):
            self._sync_tool_dicts = [t for t in tools if t is not None]
        out = super()._tool_call_loop(prompts, prompt_ids, completion_ids, completions, *rest)
        for t in tools:
            if t is not None:
                t.finish()
        return out

    def _picks(self, failed: list[int], task_ids: list[str], k: int) -> dict[int, list[str]]:
        """The router's siblings for each failed group, chosen once on the main process and sent to every rank."""
        if not failed or self.rescue.pick is None:
            return {}
        pick = self.rescue.pick
        chosen = [{g: pick(task_ids[g * k], k) for g in failed} if self.accelerator.is_main_process else None]
        if self.accelerator.num_processes > 1:
            broadcast_object_list(chosen)
        assert chosen[0] is not None
        return chosen[0]

    @staticmethod
    def _loss_mask(inputs: dict[str, Any]) -> torch.Tensor:
        """Policy tokens only: the completion, less tool observations (TRL's tool_mask)."""
        mask = inputs["completion_mask"]
        return mask * inputs["tool_mask"] if "tool_mask" in inputs else mask
