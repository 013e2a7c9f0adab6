"""Storage account (docs/accounts.md): bytes retained, and the rate and share of checkpoint saves."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StorageAccount:
    data_bytes: float  # the training data as stored
    checkpoint_bytes: float  # one restartable checkpoint
    checkpoints_bytes: float  # all checkpoints kept
    exports_bytes: float
    retained_bytes: float
    input_byte_rate: float  # average bytes/s read during training
    save_seconds: float
    save_share: float  # share of wall time blocked by saves


def storage_account(data_bytes: float, params: float, restart_bytes_per_param: float, checkpoints_kept: int,
                    export_bytes_per_param: float, exports: int, copies: int, write_rate: float,
                    save_every: float, train_seconds: float, epochs: float) -> StorageAccount:
    checkpoint = params * restart_bytes_per_param
    kept = checkpoint * checkpoints_kept
    exported = params * export_bytes_per_param * exports
    retained = (data_bytes + kept + exported) * copies
    save_seconds = checkpoint / write_rate
    return StorageAccount(
        data_bytes=data_bytes,
        checkpoint_bytes=checkpoint,
        checkpoints_bytes=kept,
        exports_bytes=exported,
        retained_bytes=retained,
        input_byte_rate=data_bytes * epochs / train_seconds,
        save_seconds=save_seconds,
        # a blocking save every `save_every` seconds of training
        save_share=save_seconds / save_every,
    )
