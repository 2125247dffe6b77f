"""The ``lens`` command (:mod:`lens_cli.main`) and ``lens demo`` (:mod:`lens_cli.demo`): the top room,
which uses every other (the bridge, the report, the CI tools) and which none of them imports."""
