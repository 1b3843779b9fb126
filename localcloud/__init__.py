"""Offline cloud: runs template.yaml on moto with the real handlers and ASL, no AWS account and no Docker."""
