"""ctxweb's compaction engine: plain Python, no Django, no Celery, no I/O beyond what a caller passes in."""
