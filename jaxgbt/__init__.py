"""jaxgbt: gradient boosting with autodiff losses and oblivious trees, in JAX."""

from jaxgbt import differentiable as differentiable
from jaxgbt import distributed as distributed
from jaxgbt import objectives as objectives
from jaxgbt import plot as plot
from jaxgbt.data.chunks import ChunkedData as ChunkedData
from jaxgbt.differentiable import as_function as as_function
from jaxgbt.differentiable import finetune as finetune
from jaxgbt.differentiable import finetune_trace as finetune_trace
from jaxgbt.differentiable import pairwise_auc_loss as pairwise_auc_loss
from jaxgbt.differentiable import soft_predict_raw as soft_predict_raw
from jaxgbt.engine.cache import enable_persistent_cache
from jaxgbt.engine.compile import clear_caches as clear_caches
from jaxgbt.evaluation import metrics as metrics
from jaxgbt.evaluation.evaluator import Callback as Callback
from jaxgbt.evaluation.evaluator import EvalState as EvalState
from jaxgbt.fitting import fit as fit
from jaxgbt.forest import Forest as Forest
from jaxgbt.forest import fit_forest as fit_forest
from jaxgbt.inspection import PermutationImportance as PermutationImportance
from jaxgbt.inspection import permutation_importance as permutation_importance
from jaxgbt.io.dump import dump as dump
from jaxgbt.io.export import export as export
from jaxgbt.io.export import load_exported as load_exported
from jaxgbt.io.model_format import save as save
from jaxgbt.io.onnx import to_onnx as to_onnx
from jaxgbt.model import Booster as Booster
from jaxgbt.model import load as load
from jaxgbt.model_selection import AutoFit as AutoFit
from jaxgbt.model_selection import CVResult as CVResult
from jaxgbt.model_selection import cv as cv
from jaxgbt.model_selection import fit_auto as fit_auto
from jaxgbt.objectives import Objective as Objective
from jaxgbt.sweeps import fit_many as fit_many
from jaxgbt.sweeps import member as member
from jaxgbt.version import __version__ as __version__

# Importing the modules above compiles nothing; JAX reads the cache settings at its first
# compilation, which comes after this.
enable_persistent_cache()

# The scikit-learn estimators import scikit-learn, an optional dependency: they are
# loaded on first use, so that ``import jaxgbt`` works without it.
_SKLEARN_ESTIMATORS = ("JaxGBTClassifier", "JaxGBTRanker", "JaxGBTRegressor")


def __getattr__(name: str):
    if name in _SKLEARN_ESTIMATORS:
        from jaxgbt import sklearn

        return getattr(sklearn, name)
    raise AttributeError(f"module 'jaxgbt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_SKLEARN_ESTIMATORS])
