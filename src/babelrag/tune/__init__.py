"""``babelrag tune``: the relevance model and a per-cell retrieval profile, fitted on a KB's golden dev
questions (``training.py`` collects candidates, ``profile.py`` chooses per cell, ``runner.py`` drives it)."""
