"""pokeralphctl: the small, fast client of pokeralphd (standard library only on common paths)."""

__version__ = "0.1.0"
