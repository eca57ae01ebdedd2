"""Scoring: metrics as plain JAX functions, and the evaluator that scores validation
sets every round (early stopping, callbacks, history)."""
