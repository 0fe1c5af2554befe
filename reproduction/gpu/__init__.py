"""``make gpu-check``: everything the plugin needs to prove and measure itself on one CUDA GPU,
ready before a GPU is there (docs/gpu.md).

* ``gpu.wheels``: the pinned cp312 manylinux wheels that ``make gpu-wheels`` fetches on a
  machine with PyPI, for a GPU machine that reaches no package registry;
* ``gpu.check``: the entry point; stops at once without CUDA, installs the wheels without
  a network, runs the parts and writes one results folder with a summary table;
* ``gpu.training``: 200-update ``--fp16`` and ``--bf16`` fairseq training of every family at
  base size on the data shipped with the quickstart, judged from fairseq's own log;
* ``gpu.throughput``: training throughput and model FLOPs utilisation (``gpu.flops``) of every
  family beside fairseq's reference model of the same size;
* ``gpu.fairseq_train``: ``fairseq-train`` with ``--bf16`` meaning bfloat16 on the GPU.
* ``gpu.rehearse``: ``make gpu-rehearsal``, the GPU machine's software (CPython 3.12, its
  image's torch) rebuilt on a CPU machine, running every part that needs no CUDA.

Nothing here imports fairseq at module level, so that ``gpu.check`` can run (and refuse a
machine without CUDA) before fairseq is installed.
"""
