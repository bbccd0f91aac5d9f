"""Entry point of ``python -m ovl_runtime`` (see ``_cli/main.py``)."""

import sys

from ._cli.main import main

sys.exit(main())
