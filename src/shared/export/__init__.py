"""The HealthLake export workflow: the run lock, the export and its checks, the fan-out of the records."""
