"""jaxgbt: gradient boosting with autodiff losses and oblivious trees, in JAX."""

from jaxgbt import metrics as metrics
from jaxgbt import objectives as objectives
from jaxgbt._fit import fit as fit
from jaxgbt.io import load as load
from jaxgbt.io import save as save
from jaxgbt.model import Booster as Booster
from jaxgbt.objectives import Objective as Objective

__version__ = "0.1.0"
