"""ingest: file -> pages -> tokens -> chunks -> library + prefilled states (see pipeline.py)."""
