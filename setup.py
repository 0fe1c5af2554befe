"""fairseq_ext: install what training and decoding need; extras for the rest.

fairseq itself is installed with ``pip install --no-deps fairseq-fixed==0.12.3.1`` (Python >= 3.11;
``fairseq==0.12.2`` before): its metadata asks for torchaudio, which fails to import beside a
CPU torch and breaks transformers. Its own runtime needs are listed here instead, with the
versions fairseq-fixed pins (hydra-core 1.3.2, omegaconf 2.3.0), so that ``pip check`` reports
only the torchaudio it asks for. fairseq 0.12.2 (Python < 3.11) asks for hydra-core < 1.1 and
omegaconf < 2.1; those are not pinned: the plugin is tested with fairseq-fixed only. Install a
CPU torch first where there is no GPU, or pip takes a CUDA build of several GB (README, Install).
"""

from setuptools import find_packages, setup

VERSION = "0.2.0"
FAIRSEQ_FIXED = 'python_version >= "3.11"'
FAIRSEQ_NEEDS = [
    "torch>=2.1,<2.15",
    "numpy>=1.21.3",
    "bitarray",
    "cffi",
    "cython",
    "regex",
    "tqdm",
    "scikit-learn",
    "packaging",
    "sacrebleu>=2.0",
    f"hydra-core==1.3.2; {FAIRSEQ_FIXED}",
    f"omegaconf==2.3.0; {FAIRSEQ_FIXED}",
    'hydra-core>=1.0.7,<1.4; python_version < "3.11"',
    'omegaconf>=2.0.6,<2.4; python_version < "3.11"',
]
EXTRAS = {
    # WordPiece tokenisation and conversion of transformers folders (BERT family, ProphetNet)
    "convert": ["tokenizers>=0.13", "transformers>=4.30", "safetensors"],
    # ROUGE for headline generation (rouge-score, Lin 2004's ROUGE-1/2/L); the Moses tokenizer
    # of tokenized BLEU (fairseq_ext.analysis.tokenized_bleu, the WMT recipes' bleu.json)
    "eval": ["rouge-score", "sacremoses>=0.1"],
    # mask pictures (python -m fairseq_ext.analysis draw-mask) and results figures
    "plots": ["matplotlib"],
    # the reproduction machinery: significance tests, figures, the transformers reference, and
    # CTranslate2, the engine the decoding bench runs the autoregressive models in
    "research": [
        "scipy",
        "matplotlib",
        "rouge-score",
        "sacremoses>=0.1",
        "transformers>=4.30",
        "safetensors",
        "ctranslate2>=4.4",
    ],
}
EXTRAS["test"] = sorted(
    {d for deps in EXTRAS.values() for d in deps} | {"pytest>=7", "pytest-xdist>=3", "ruff"}
)

setup(
    name="fairseq_ext",
    version=VERSION,
    description="A Transformer is a play, and the mask is the script: HI-CMLM, ProphetNet, "
    "position masking and UniLM attention masks as a fairseq plugin",
    license="MIT",
    # data_prep/ ships as fairseq_ext.data_prep: python -m fairseq_ext.data_prep NAME [ARGS]
    packages=find_packages(include=["fairseq_ext", "fairseq_ext.*"]) + ["fairseq_ext.data_prep"],
    package_dir={"fairseq_ext.data_prep": "data_prep"},
    # the quickstart's student under a name fairseq_ext.hub.from_pretrained resolves: its one
    # file (11 MB), which examples/quickstart/model/checkpoint.pt links to
    package_data={
        "fairseq_ext.data_prep": ["*.sh"],
        "fairseq_ext.hub": ["models/*/checkpoint.pt", "models/*/dict.*.txt", "models/*/spm.model"],
    },
    python_requires=">=3.9",
    install_requires=["sentencepiece>=0.1.99", *FAIRSEQ_NEEDS],
    extras_require=EXTRAS,
)
