"""The documents workflow's own step: tagging the translated documents by Macie's findings."""
