"""The generalized callback: a waiting task's token paired with its job (service, tokens), the services' adapters
and the reconciler."""
