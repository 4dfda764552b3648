"""Offline algorithms: what each metric computes when no judge is given.

They run on the bundled embedder and cheap lexical checks. They approximate what an
LLM judge would say; they are not a chat model and do not pretend to be one.
"""
