"""Retrieval: one search over the collections a user may see (search.py), from the lexical,
dense and picture channels, fused and reranked; scope.py decides what a search may read."""
