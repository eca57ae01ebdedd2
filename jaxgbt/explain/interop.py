"""SHAP values as a ``shap.Explanation``, so that ``shap.plots.*`` draw them.

``shap`` is an optional dependency (``pip install 'jaxgbt[shap]'``); nothing else in
jaxgbt needs it.
"""

import numpy as np

MSG_NO_SHAP = ("{what} returns a shap.Explanation and needs the shap package: pip install "
               "'jaxgbt[shap]' (or shap). Booster.shap_values and expected_value need "
               "nothing more.")


def explanation(values: np.ndarray, base_values: np.ndarray, data: np.ndarray,
                feature_names: tuple[str, ...]):
    """A ``shap.Explanation`` of N rows.

    Args:
      values: f[N, F] (or f[N, F, K]) SHAP values.
      base_values: f[] (or f[K]), the expected value, repeated for every row.
      data: f[N, F], the rows as the model reads them (categorical columns as codes).
      feature_names: F names.
    """
    try:
        import shap
    except ImportError:
        raise ImportError(MSG_NO_SHAP.format(what="Booster.explain")) from None
    values = np.asarray(values)
    base = np.broadcast_to(np.asarray(base_values), (values.shape[0],) + values.shape[2:])
    return shap.Explanation(values=values, base_values=np.array(base), data=np.asarray(data),
                            feature_names=list(feature_names))
