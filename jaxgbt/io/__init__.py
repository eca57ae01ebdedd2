"""Files: the model format (``save``/``load``), checkpoints and exported programs.

Every reader treats its file as untrusted input: bounded reads, no pickle, and a
``ModelFormatError`` that says what is wrong with the file.
"""

from jaxgbt.io.model_format import ModelFormatError as ModelFormatError
from jaxgbt.io.model_format import load as load
from jaxgbt.io.model_format import save as save
