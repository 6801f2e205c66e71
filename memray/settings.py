"""The one place that reads MEMRAY_* environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Environment overrides, applied only where the config leaves a field unset."""

    model_config = SettingsConfigDict(env_prefix="MEMRAY_", extra="ignore")

    enabled: bool = Field(True, description="MEMRAY_ENABLED=false turns add/search into no-ops.")
    milvus_uri: str | None = Field(None, description="MEMRAY_MILVUS_URI: a Milvus server.")
    milvus_token: str | None = Field(None, description="MEMRAY_MILVUS_TOKEN.")
    postgres_dsn: str | None = Field(None, description="MEMRAY_POSTGRES_DSN: PostgreSQL for "
                                     "the shared event log (cluster mode).")
    tracing: bool = Field(False, description="MEMRAY_TRACING=true: OpenTelemetry spans "
                          "(needs the otel extra), where config leaves tracing.enabled unset.")
    tracing_content: bool = Field(False, description="MEMRAY_TRACING_CONTENT=true: content "
                                  "on spans, where config leaves tracing.capture_content unset.")
    master_key: str | None = Field(None, description="MEMRAY_MASTER_KEY: the master key "
                                   "(base64 of 32 bytes) that wraps the per-user data keys, "
                                   "where security.encryption names no file or secret.",
                                   repr=False)


def load_settings() -> Settings:
    """Read the environment now (not at import, so tests can set variables)."""
    return Settings()
