"""The HTTP API of `verity serve`: FastAPI over the producer API (`client`)."""

from api.app import create_app
from api.settings import ApiSettings

__all__ = ["ApiSettings", "create_app"]
