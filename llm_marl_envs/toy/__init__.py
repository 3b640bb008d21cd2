"""Toy tasks: tiny, fast environments for checking trainers end to end."""
