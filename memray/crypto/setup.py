"""The cipher a config asks for: the master key from a file, a mounted Kubernetes secret
or MEMRAY_MASTER_KEY, in that order; None when encryption is off."""

from __future__ import annotations

from memray.config import EncryptionConfig
from memray.crypto import keys
from memray.crypto.cipher import UserCipher
from memray.errors import ConfigError
from memray.settings import Settings
from memray.store.events import JobState


def master_key(cfg: EncryptionConfig, settings: Settings) -> keys.StaticMasterKey:
    if cfg.master_key_file:
        return keys.from_file(cfg.master_key_file)
    if cfg.k8s_secret_dir:
        return keys.from_kubernetes_secret(cfg.k8s_secret_dir, cfg.k8s_secret_key)
    if settings.master_key:
        return keys.from_text(settings.master_key, "MEMRAY_MASTER_KEY")
    raise ConfigError("security.encryption is on but no master key is given: set "
                      "master_key_file, k8s_secret_dir or MEMRAY_MASTER_KEY "
                      "(`memray keys master` prints a new one)")


def build_cipher(cfg: EncryptionConfig, settings: Settings,
                 log: JobState) -> UserCipher | None:
    """The cipher over `log`'s data keys; keys wrapped by a previous master key are
    re-wrapped under the current one first (content is not re-encrypted)."""
    if not cfg.enabled:
        return None
    previous = [keys.from_file(p) for p in cfg.previous_key_files]
    cipher = UserCipher(log, master_key(cfg, settings), previous, cache_s=cfg.key_cache_s)
    cipher.rewrap()
    return cipher
