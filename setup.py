from setuptools import find_packages, setup

setup(
    name="fairseq_ext",
    version="0.1.0",
    description="A Transformer is a play, and the mask is the script: HI-CMLM, ProphetNet, "
                "position masking and UniLM attention masks as a fairseq plugin",
    packages=find_packages(include=["fairseq_ext", "fairseq_ext.*"]),
    python_requires=">=3.9",
    install_requires=[
        "fairseq==0.12.2; python_version < '3.11'",
        "fairseq-fixed==0.12.3.1; python_version >= '3.11'",
        # fairseq's own runtime needs, listed so that fairseq can be installed with
        # --no-deps (its torchaudio requirement breaks beside a CPU torch; see Makefile).
        "torch>=2.1,<2.15",
        "numpy",
        "hydra-core>=1.0.7,<1.4",
        "omegaconf>=2.0.6,<2.4",
        "bitarray",
        "cffi",
        "cython",
        "regex",
        "tqdm",
        "scikit-learn",
        "packaging",
        "sentencepiece>=0.1.99",
        "sacrebleu>=2.0",
        "rouge-score",
        "matplotlib",
    ],
    # transformers: the independent ProphetNet the tests and benchmarks compare with (no weights
    # are downloaded; tiny random configurations only).
    extras_require={"test": ["pytest>=7", "pytest-xdist>=3", "transformers>=4.30"]},
)
