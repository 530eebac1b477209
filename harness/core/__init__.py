"""The foundation every layer shares: settings, errors, condition names, models and training helpers."""
