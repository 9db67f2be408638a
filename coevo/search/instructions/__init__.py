"""Evolving the free text of harness templates with GEPA, inside the h-phase.

A search space key such as `templates.system: {evolve: gepa, budget: 40, reflection_lm: openai/NAME}`
asks each h-phase to first run GEPA (the `gepa` package, through its adapter API) on the incumbent's
template for that slot, scored by coevo's own rollouts on the evolve set, and then to let Optuna choose
among the base template, the incumbent's and the best evolved ones, like any other categorical.

    spec.py      the space entry: `EvolveSpec`, its checks, the Param it becomes
    reflect.py   what the reflection LM reads (trajectories -> records) and how its reply is parsed
    adapter.py   the GEPAAdapter: evaluate (rollouts), make_reflective_dataset, propose_new_texts
    lineage.py   evolved templates as files in the run folder, with parent and diff; rejections
    evolve.py    the h-phase hook: run GEPA once per phase and key (or read its saved result)
    tracking.py  the evolved texts and their lineage in MLflow
"""
