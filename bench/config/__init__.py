"""Configuration: the single path from YAML to a job's JSON.

- :mod:`bench.config.validate`: load the profile files (the embedded default merged with
  ``--configfile``s), fill the JSON schema's defaults, validate, check cross-references;
- :mod:`bench.config.plan`: every planning decision the workflow needs (tables, figures,
  runs, evaluations, specs), unit-tested; ``workflows/common.smk`` only calls it;
- :mod:`bench.config.schema`: the config JSON schema, the only home of keys, types, bounds and
  defaults (the study's and each job's sections);
- :mod:`bench.config.kinds`: the registry of run kinds (rule, method key, resolver, run function);
- :mod:`bench.config.run`: read one job's config file, pick its method, resolve its sections
  against the schema.

Nothing here imports torch: the Snakefile imports this package.
"""
