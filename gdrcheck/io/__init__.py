"""Run plumbing: the one re-rootable door to the machine (source.py), deadlines, output files, redaction."""
