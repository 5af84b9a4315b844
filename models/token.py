"""HTTP API tokens as the store returns them: never the secret, only what it is bound to."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from models.common import Contract


class ApiToken(Contract):
    """An api_token row: a tenant's credential for the HTTP API."""

    token_id: str = Field(description="Token id (public; `verity tokens revoke ID`).")
    tenant_id: str = Field(description="The tenant every request with it acts as.")
    name: str = Field(description="What the token is for, e.g. 'web-app'.")
    created_at: datetime | None = Field(default=None, description="Created (UTC).")
    revoked_at: datetime | None = Field(default=None, description="Revoked (UTC); then refused.")
    last_used_at: datetime | None = Field(
        default=None, description="Last accepted request (UTC, to within a minute).")

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None
