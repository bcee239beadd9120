"""Everything on disk: the ``.pokeralph/`` folder (FileManager), the user registry, locks."""
