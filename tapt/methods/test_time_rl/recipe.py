"""Test-time RL's recipe table: each point of TTRL as its authors' code runs it, what runs here, and why
a point is kept different (`tapt-bench methods show test-time-rl`)."""

from __future__ import annotations

from tapt.methods import recipe_table

# TTRL: its released scripts and the verl config they run (PRIME-RL/TTRL); the rows that cite a file were
# read at 3e2cc93 (verl/verl/utils/reward_score/ttrl/, verl/verl/trainer/, ppo_trainer.yaml, and the
# launch scripts verl/examples/ttrl/aime.sh and amc.sh)
RECIPE = recipe_table(
    [
        ("algorithm", "GRPO in a vendored verl (aime.sh:13)", "GRPO: TRL's GRPOTrainer", ""),
        ("reward", "1 if the answer equals the majority vote (ttt_metrics.py:20-28)", "the same", ""),
        (
            "sampling",
            "free text from the policy (vLLM, aime.sh:68)",
            "answers choices: the policy renormalised over the tokens that stay on one of the prompt's "
            "choices, then the end; the loss reads the policy's own log-probs of them; free: free text",
            "free text named no choice in 30.5-82.4% of the base's samples (benchmarks/ttrl_answers.py; "
            "docs/measurements/methods.md)",
        ),
        (
            "answer",
            "math: the last \\boxed{} of the completion, else its last number (qwen_math_parser.py:485-525); "
            "multiple choice (gpqa): the last A-E letter as a word, else the whole completion stripped "
            "(qwen_math_parser.py:490-491, 580-591)",
            "the choice sampled; free: the first choice named, as a whole word (free_answer: last, theirs)",
            "an answer is a task's choice; free: the first, as the study's free-text records ran",
        ),
        (
            "answer, generative",
            "math: the minerva form, else the last \\boxed{}, else what follows 'he answer is', else 'final "
            "answer is', else the last number (qwen_math_parser.py:485-531), then normalised (LaTeX, units, "
            "spaces)",
            "extract math: the same rules in the same order, then its clean-up (new lines, a leading ':', a "
            "trailing '.' or '/'); extract task: the task's own first filter, as lm-eval reads the answer it "
            "scores",
            "the parser's LaTeX and unit normalisation (strip_string) is not reproduced",
        ),
        (
            "reward, generative",
            "1 where the answer is equivalent to the vote, by sympy and string rules (ttt_metrics.py:27, "
            "auto_verify.py:22)",
            "1 where the two are equal as numbers (36, 36.0 and 36.00 agree), else as text",
            "numeric equivalence covers the offline task's sums; symbolic answers are compared as text",
        ),
        (
            "stop, generative",
            "the end of sequence (vLLM, aime.sh:68)",
            "the task's stop strings and max_gen_toks (lm-eval's generation_kwargs)",
            "a sample ends where lm-eval's generation of the same prompt ends",
        ),
        ("tie", "the answer counted first (Counter.most_common, ttt_metrics.py:19-21)", "the same", ""),
        (
            "no answer",
            "a completion that names no letter votes as its whole text, and '' like any other answer: where "
            "it wins, non-answers are rewarded (qwen_math_parser.py:580-591, ttt_metrics.py:18-27)",
            "answers choices: every sample answers; free: no vote, reward 0 (non_answers_vote: true, theirs)",
            "free: 'no answer' would win 26, 7 and 31 of 32 of the base's groups on ag_news, rotten_tomatoes "
            "and trec, and teach not to answer (benchmarks/ttrl_answers.py)",
        ),
        (
            "ground truth",
            "the same RL rewarded by the gold answer: the reward manager's eval mode (ttrl.py:281-284)",
            "the leak condition",
            "",
        ),
        (
            "control",
            "none: it trains on the test set it reports (aime.sh:47-48, train and test of one task)",
            "the extra condition",
            "the design's control",
        ),
        (
            "samples",
            "64 voted, 32 trained on (aime.sh:26-27)",
            "8, voted and trained on",
            "a step costs K generations and passes a prompt",
        ),
        ("temperature", "1.0 (aime.sh:69)", "the same", ""),
        (
            "KL",
            "a KL loss, coefficient 0.001, low_var_kl: k3 clamped to [-10, 10] (core_algos.py:484-489)",
            "TRL's beta 0.001 against the base (also on a carried stream's later chunks); k3 times the "
            "ratio (kl_ratio_weighted; false: k3 alone, theirs), never clamped",
            "TRL 1.16's default, as the study's records ran (the three training rows set the authors' way "
            "moved an adapter 0.1%, docs/measurements/methods.md); TRL has no clamp",
        ),
        (
            "weight decay",
            "0.01 (ppo_trainer.yaml:64)",
            "0 (weight_decay: 0.01, theirs)",
            "TRL's default, as the study's records ran (see KL)",
        ),
        (
            "dual clip",
            "clip_ratio_c 3 (ppo_trainer.yaml:45)",
            "none (dual_clip: 3, theirs, through TRL's two-sided clip delta: the same cap)",
            "TRL's default, as the study's records ran (see KL)",
        ),
        ("rollout", "8 prompts (aime.sh:25)", "the same", ""),
        ("updates", "one clipped step per prompt: 8 per rollout (aime.sh:28, 57)", "the same", ""),
        (
            "update order",
            "a prompt's completions together: a mini-batch is 1 prompt's 32 (aime.sh:28, 57)",
            "the same (TRL shuffles them)",
            "",
        ),
        (
            "prompt reads",
            "vLLM samples a prompt's group from one prefill (aime.sh:68, 77); verl's forward and backward "
            "read it per sample",
            "once per group in both: its cache shared",
            "the same numbers; training reads a prompt once, not K times",
        ),
        ("schedule", "cosine after 3% warm-up (aime.sh:61-62)", "the same", ""),
        (
            "weights, lr",
            "all weights of Qwen2.5-Math-1.5B; 5e-7 (amc.sh:12, aime.sh:60)",
            "LoRA r 16 (all linear); 1e-4",
            "5e-7 on a LoRA moves nothing",
        ),
        (
            "epochs",
            "80 episodes over AIME's prompts, 30 over AMC's (aime.sh:24, amc.sh:24)",
            "1",
            "a pass reads each prompt K times, twice over",
        ),
        (
            "completion",
            "a reasoning answer of up to 3072 tokens (aime.sh:15-17)",
            "the longest choice's tokens + 1",
            "a choice is short",
        ),
        (
            "prompt",
            "the task's prompt in the chat template (rl_dataset.py:206)",
            "lm-eval's zero-shot prompt",
            "the design scores it",
        ),
        (
            "last prompts",
            "a partial last rollout dropped, prompts reshuffled each episode (ray_trainer.py:485-497)",
            "a split that rollouts do not divide: refused",
            "one episode: a dropped prompt would never be trained on",
        ),
    ]
)
