"""The method engine: the registry of methods (:mod:`.registry`) and the shared models and run artefacts
(:mod:`.store`). Records -> artefacts -> methods -> combiners -> results."""
