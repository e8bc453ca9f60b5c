"""Declared pipelines: a windowed pipeline over a user's own JSON-lines events, declared in the
lab's TOML file instead of written as a package (docs/declared-pipelines.md).

``declaration`` reads and validates a ``[pipelines.NAME]`` section with a ``kind`` (its
``measures`` and its ``field_rules`` each in a module of their own); ``parse``
turns log lines into the lab's parsed rows by the declaration; ``proposal`` drafts a
declaration from a sample of lines (``lklab init``). The jobs are built on them: ``tables``
(named after the pipeline, shaped by the declaration), ``rule`` (the stream's step in Arrow),
``stream`` (its ``StreamRule``), ``truth`` (its ``TruthRule``), ``reconcile`` (its
``ReconcileRule``), ``jobs`` and ``pipeline`` (``pipeline_of``: the ``Pipeline`` the command
line runs); ``foreign_gaps`` explains from the log the gaps between two tables the lab did not
write. Like every pipeline's package, this one imports no other pipeline's.
"""
