"""Rendering of the study's outputs: tables (Markdown, LaTeX, HTML) and figures (PNG, PDF).

``tables`` renders a statistics table, ``figures`` draws every figure of docs/experiments.md,
``paper`` loads the numbers printed in the source papers, ``cli`` wires them to
``ltr-bench table``, ``ltr-bench figure`` and ``ltr-bench compare-table``.
"""
