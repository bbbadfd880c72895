"""Compact copies of the real datasets the model zoo trains on, and the code that made them.

``fsdd_logmel.npz`` holds the Free Spoken Digit Dataset as quantised log-mel spectrograms
(see ``convert_fsdd``); ``ATTRIBUTION.md`` gives sources and licences.
"""

from adaserve.models.data.logmel import LogMelConfig, log_mel, mel_filterbank

__all__ = ["LogMelConfig", "log_mel", "mel_filterbank"]
