"""Weights in and out of the plugin's models (command line: ``python -m fairseq_ext.convert``).

* ``bert``: transformers' BERT-family checkpoints -> one fairseq checkpoint that
  ``position_masked_roberta`` and ``unilm_transformer --init-from`` load;
* ``prophetnet``: transformers' ProphetNet folders <-> ``prophetnet`` checkpoints;
* ``prophetnet_transformers``: the parameter names and layouts of the two ProphetNets, the
  config of the same sizes, and the correction of transformers' predicting-stream
  relative-position layout;
* ``vocabulary``: WordPiece vocabularies <-> fairseq dictionaries, row for row;
* ``transformers_folder``: reading and writing transformers folders; ``training_options``: the
  options a converted model is built with (``fairseq_ext.checkpoints.converted`` writes it).

transformers is imported only where a function needs it (the ProphetNet config).
"""
