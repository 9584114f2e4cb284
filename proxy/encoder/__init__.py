"""The embedding model the app holds once: :mod:`proxy.encoder.service`."""
