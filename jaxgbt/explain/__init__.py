"""Explanations of a fitted model computed from its tree arrays: feature importance."""
