"""Teaching labs that grade themselves: a scenario catalogue, assignments, attempts, scores, hints.

``scenario`` is the data format, ``catalogue`` loads and validates the files,
``match`` binds a scenario's roles to a project's nodes, ``store`` keeps
assignments, attempts and hints, ``guard`` keeps the copilot's tools from
replaying a fault's recorded undo for a student, ``service`` runs it all
(``docs/teaching.md``).
"""
