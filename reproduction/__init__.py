"""The machinery that measured the plugin: table drivers, collectors, kept runs and results
files, the reference ProphetNet loop, the bisection, the benchmarks and the GPU check. It
imports the product (``fairseq_ext``); the product never imports it."""
