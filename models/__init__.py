"""Verity's contracts: pydantic models (one module per contract family) and the SQLAlchemy tables.

Data only. Validation lives here; behaviour lives in `pipeline/`.
"""
