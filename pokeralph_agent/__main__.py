"""``python -m pokeralph_agent``: the local agent (see :mod:`.cli`)."""

import sys

from pokeralph_agent.cli import main

sys.exit(main())
