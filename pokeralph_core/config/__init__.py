"""Reading a repository's configuration, as the daemon and the local agent both do: the
layers (built-in defaults, the user's file, the repository's ``.pokeralph/config.json``)
merged, validated and weighed for trust, so an untrusted repository layer only tightens.

- :mod:`.model`: the ``Config`` document people edit, every field bounded (and the
  execution ``mode`` battles carry);
- :mod:`.sandbox`: its ``sandbox.*`` part and the host patterns of ``network.allow``;
- :mod:`.tightening`: what an untrusted layer may change (only what makes things
  stricter), decided on the models, pure;
- :mod:`.layers`: reading the layers, merging, validating, trust, the effective config,
  and webhook URLs redacted wherever a config is described.

Writing the layers is the daemon's alone (``pokeralphd.store.config_writes``): it is the
one writer of these files. Everything here raises the core's errors
(:mod:`pokeralph_core.errors`). This ``__init__`` imports nothing.
"""
