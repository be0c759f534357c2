"""Persistence: the sqlite library (store.library) and the chunk-state store (store.chunk_store).

`store` imports only numpy, faiss, sqlite-utils and the standard library (never torch/drt_core).
"""
