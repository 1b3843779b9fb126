"""The unit tests: one package, so that its fixtures of package scope (template.yaml deployed on moto) end with it."""
