"""Deciding whether a model may ship: findings and their catalog, budgets, checks of one or many models,
and diffs against a baseline document.
"""
