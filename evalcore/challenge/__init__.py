"""Adapters that let challenge platforms run evalcore as their scorer: EvalAI (``evalai``) and
Codabench / CodaLab (``codabench``). Each scores one submission in this process, public split first."""
