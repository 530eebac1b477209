"""The plumbing every layer stands on: errors, settings and their sections and flags, YAML, plug-in
loading and kinds, provenance and recipe tables."""
