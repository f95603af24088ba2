"""The learned relevance stage: features of a candidate (``features.py``), the calibrated model over them
(``model.py``) and the reranker that applies it (``learned.py``)."""
