"""OpenTelemetry parts: the span processor and its instruments, set-up, the local store,
the live tracker, and the span writer of replayed transcripts.
"""
