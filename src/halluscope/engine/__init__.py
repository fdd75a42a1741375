"""The method engine: the registry of methods (:mod:`.registry`), the shared models and run artefacts
(:mod:`.store`), and the response-level components computed on them (:mod:`.components`). Records -> artefacts ->
methods -> combiners -> results."""
