"""Contrastive fine-tuning of the embedding model (see :mod:`retriever.finetune.train`)."""
