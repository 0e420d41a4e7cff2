"""`domino-report`: compare training runs (the paper's ablations) from run folders, offline W&B runs or the
W&B API, as a Markdown table and PNG plots; optionally log domino-decode results to W&B (job_type=eval)."""
