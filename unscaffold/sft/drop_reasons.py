"""Why `build-sft` drops a trial: one enumeration, one reason per fault, each explained once."""

from __future__ import annotations

from enum import StrEnum

from unscaffold.outcomes import Outcome


class DropReason(StrEnum):
    UNFINISHED = "unfinished"
    NO_TRAJECTORY = "no_trajectory"
    # one per error outcome, named and spelled as the outcome (a trial that ended so is dropped for it)
    ENVIRONMENT_ERROR = Outcome.ENVIRONMENT_ERROR.value
    ENVIRONMENT_UNSUPPORTED = Outcome.ENVIRONMENT_UNSUPPORTED.value
    VERIFIER_ERROR = Outcome.VERIFIER_ERROR.value
    INFRA_ERROR = Outcome.INFRA_ERROR.value
    REFUSED_ARTIFACT = "refused_artifact"
    EXCEPTION = "exception"
    LOW_REWARD = "low_reward"
    NOT_DEPLOYMENT_HARNESS = "not_deployment_harness"
    NO_TASK_OPENING = "audit:no_task_opening"
    SYSTEM_PROMPT_CHANGED = "audit:system_prompt_changed"
    ORPHAN_OBSERVATION = "audit:orphan_observation"
    MARKUP_IN_TEXT = "audit:markup_in_text"
    MARKUP_IN_CALL = "audit:markup_in_tool_call"
    STEP_NOT_ASSISTANT = "audit:step_not_assistant"
    STEP_IN_OPENING = "audit:step_in_opening"
    COMMAND_MISMATCH = "audit:command_mismatch"
    REVIEW_LOG_MISMATCH = "audit:review_log_mismatch"
    NO_FINAL_ANSWER = "audit:no_final_answer"
    FORMAT_ERROR = "format_error"
    REVIEWER_WORDING_IN_CONTENT = "reviewer_wording_in_content"
    LEAK_K_PATH = "leak:k_path"
    LEAK_COMPONENT_ID = "leak:component_id"
    LEAK_COMPONENT_NAME = "leak:component_name"
    LEAK_REVIEWER_TOOL = "leak:reviewer_tool"
    LEAK_CANARY = "leak:canary"


EXPLAINED: dict[DropReason, str] = {
    DropReason.UNFINISHED: "the trial has no result.json (the run was stopped before it finished)",
    DropReason.NO_TRAJECTORY: "the trial has no trajectory.json (it failed before its first step)",
    DropReason.ENVIRONMENT_ERROR: "the task's environment failed (its reference solution or image build)",
    DropReason.ENVIRONMENT_UNSUPPORTED: "the sandbox could not set up the task's environment and the trial failed",
    DropReason.VERIFIER_ERROR: "the verifier failed (no reward, a reward outside [0, 1], a crash)",
    DropReason.INFRA_ERROR: "the machinery failed (sandbox start, model service)",
    DropReason.REFUSED_ARTIFACT: "an output the scorer read was refused (a link, a special file, too large)",
    DropReason.EXCEPTION: "the trial ended in an exception (kept with --keep-all)",
    DropReason.LOW_REWARD: "the reward is below --min-reward (kept with --keep-all)",
    DropReason.NOT_DEPLOYMENT_HARNESS: "the run used h*, not the minimal harness the model is deployed with",
    DropReason.NO_TASK_OPENING: "the trajectory does not open with the system prompt and the task",
    DropReason.SYSTEM_PROMPT_CHANGED: "the system prompt is not the minimal harness's",
    DropReason.ORPHAN_OBSERVATION: "a tool result answers no call of the assistant turn before it",
    DropReason.MARKUP_IN_TEXT: "visible text holds chat-template markup (e.g. <|im_end|>, <tool_call>)",
    DropReason.MARKUP_IN_CALL: "a tool call's name or arguments hold chat-template markup (e.g. <|im_end|>, "
                               "</parameter>)",
    DropReason.STEP_NOT_ASSISTANT: "a step's record points at a message that is not an assistant turn",
    DropReason.STEP_IN_OPENING: "a step's record points into the suite's opening (its worked example is not the "
                                "student's)",
    DropReason.COMMAND_MISMATCH: "a command the step record says ran differs from the call shown",
    DropReason.REVIEW_LOG_MISMATCH: "an assistant turn differs from what the review log says was accepted",
    DropReason.NO_FINAL_ANSWER: "the trial did not end with a submitted final answer (only with --audit final-answer)",
    DropReason.FORMAT_ERROR: "a reply was malformed (only with --audit format-errors; by default its turn is context)",
    DropReason.REVIEWER_WORDING_IN_CONTENT: "a replaced turn's visible content speaks as the reviewer",
    DropReason.LEAK_K_PATH: "a path of the reviewer's K appears in the row",
    DropReason.LEAK_COMPONENT_ID: "a K component id appears in the row",
    DropReason.LEAK_COMPONENT_NAME: "a K tool or check name appears in the row",
    DropReason.LEAK_REVIEWER_TOOL: "a reviewer tool name appears in the row",
    DropReason.LEAK_CANARY: "a --canary string appears in the row",
}
