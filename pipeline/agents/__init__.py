"""Agents behind one interface: a single-turn model takes a prompt and bytes, returns text."""
