"""``python -m jaxgbt``: the ``jaxgbt`` command line."""

from jaxgbt.cli import main

if __name__ == "__main__":
    main()
