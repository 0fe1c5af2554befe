"""Weights in and out of the plugin's models.

``prophetnet_transformers``: the ``prophetnet`` model <-> transformers'
``ProphetNetForConditionalGeneration`` (parameter names and layouts, the config of the same
sizes, and the correction of transformers' predicting-stream relative-position layout).
transformers is imported only when a function needs it.
"""
