"""The ``jaxgbt`` command line (``jaxgbt train``, ``predict``, ``cv``); see ``app``."""

from jaxgbt.cli.app import app as app
from jaxgbt.cli.app import main as main
