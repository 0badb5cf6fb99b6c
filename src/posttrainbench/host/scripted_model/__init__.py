"""A scripted model endpoint: a local server that speaks the model APIs the agent CLIs use
(Anthropic Messages, OpenAI Chat Completions and Responses, Gemini generateContent), answers
from a script of turns, and records every request it received.

It stands in for a paid LLM API when a real agent CLI runs end to end offline
(``ptb agents check``, the agent CLI tests). Host-side; stdlib, pydantic and PyYAML only.
"""
