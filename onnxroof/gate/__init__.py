"""Deciding whether a model may ship: budgets (limits and finding policies), checks of one or many models,
and diffs against a baseline document. The findings themselves are facts of the analysis
(:mod:`onnxroof.analysis.findings`); a budget decides which of them fail a check.
"""
