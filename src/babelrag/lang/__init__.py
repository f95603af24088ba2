"""Languages: identification, per-language analysis for keyword search, language metadata."""
