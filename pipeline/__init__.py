"""The Verity pipeline: deterministic nodes, agents, tools and the run store. Imports no celery."""
