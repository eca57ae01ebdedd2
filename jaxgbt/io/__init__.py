"""Files: the model format (``save``; ``jaxgbt.load`` builds a Booster from
``read_model``), checkpoints and exported programs. Below ``model``: files are read
and written from a model's fields, so the Booster imports this layer, never the reverse.

Every reader treats its file as untrusted input: bounded reads, no pickle, and a
``ModelFormatError`` that says what is wrong with the file.
"""

from jaxgbt.io.archive import ModelFormatError as ModelFormatError
from jaxgbt.io.model_format import read_model as read_model
from jaxgbt.io.model_format import save as save
