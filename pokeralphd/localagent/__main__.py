"""``python -m pokeralphd.localagent``: the local agent (see :mod:`.cli`)."""

import sys

from pokeralphd.localagent.cli import main

sys.exit(main())
