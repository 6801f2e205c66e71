"""Encryption at rest with per-user data keys, for crypto-shredding (opt-in,
`security.encryption`): `keys` (master keys), `cipher` (data keys and AES-GCM),
`sealed` (the vector store and event log seen through the cipher)."""
