"""Answer generation: prompts per language, the generator, and the question-to-answer flow."""
