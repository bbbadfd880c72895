"""MOSEL profiles and strategy matrices shipped with adaserve (``store.py`` reads them). Data only."""
