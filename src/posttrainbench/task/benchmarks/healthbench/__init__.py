"""HealthBench: PostTrainBench's 245 health conversations (shipped with the package), graded
against physician-written rubrics by an LLM grader."""
