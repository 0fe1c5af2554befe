"""The checkpoints shipped in git (``git ls-files '*.pt'``: the HI-CMLM student, one file for
the quickstart and the package, and its Transformer teacher) load through the real
fairseq-generate and decode the first quickstart test sentences to exactly the hypotheses they
gave when they were committed (recorded below), so a change of the model configs cannot
silently change what an old checkpoint computes."""

import subprocess

from tests.conftest import ROOT, USER_DIR, binarize, read_sample, run

MODEL = ROOT / "examples" / "quickstart" / "model"
PACKAGED = "fairseq_ext/hub/models/hi-cmlm-multi30k-en-de/checkpoint.pt"
N = 8

# fairseq-generate's H- lines (sentencepiece pieces) for test sentences 0-7
EXPECTED = {
    "checkpoint.pt": [
        "▁Ein ▁Mann ▁macht ▁Fotos ▁von ▁weiß - ▁T au .",
        "▁Zwei ▁Männer ▁in ▁eine m ▁sich ▁auf m ▁Markt ▁Markt ▁im ▁Freien .",
        "▁Ein ▁Mann ▁und ▁ein ▁Junge ▁spielen ▁mit ▁a m ▁Strand .",
        "▁Ein ▁Heißluftballon ▁berührt ▁berührt ▁mit ▁eine m ▁Mann ▁die ▁Luft ▁hinunter .",
        "▁Diese r ▁Mann ▁trägt ▁eine ▁weiße ▁Mütze ▁ oder .",
        "▁Eine ▁Frau ▁bekommt ▁eine ▁Tätowierung en ▁und ▁schwarzen ▁von ▁schwarzer n .",
        "▁Ein ▁Kleinkind ▁mit ▁einer ▁Jeans ▁spielt ▁in ▁eine ▁Reifen .",
        "▁Eine ▁Menschenmenge ▁steht ▁in ▁Straße ▁vor ▁eine m n ▁Zelt en .",
    ],
    "teacher.pt": [
        "▁Ein ▁Mann ▁macht ▁Fotos ▁von ▁weißen ▁und ▁gelben ▁T au n .",
        "▁Zwei ▁Männer ▁in ▁ Z e ben ben ▁eine m ▁Markt ▁im ▁Freien .",
        "▁Ein ▁Mann ▁und ▁ein ▁Junge ▁spielen ▁mit ▁Sonnenuntergang ▁a m ▁Strand .",
        "▁Ein ▁Heißluftballon ▁berührt ▁einen ▁Mann ▁mit ▁eine m ▁Mann ▁im ▁Hintergrund .",
        "▁Diese r ▁Mann ▁trägt ▁eine ▁weiße ▁Mütze ▁ oder ▁Hut .",
        "▁Eine ▁Frau ▁bekommt ▁eine ▁Tätowierung ▁von ▁schwarzen ▁Tätowierung en ▁und ▁ Z e .",
        "▁Ein ▁Kleinkind ▁mit ▁Jeans ▁spielt ▁in ▁einer ▁Reifenschaukel .",
        "▁Eine ▁Menschenmenge ▁steht ▁vor ▁eine m ▁weißen ▁Zelt .",
    ],
}


def hypotheses(stdout: str) -> list[str]:
    found = {}
    for line in stdout.splitlines():
        if line.startswith("H-"):
            sentence_id, _score, text = line.split("\t")
            found[int(sentence_id[2:])] = text
    assert sorted(found) == list(range(N))
    return [found[i] for i in range(N)]


def test_every_checkpoint_in_git_is_covered():
    """git holds each shipped weight once: the teacher and the student, whose one file is the
    package's (the hub's name reads it; examples/quickstart/model/checkpoint.pt is a link to
    it); the bench's deep-shallow peer is made by its script, not kept."""
    tracked = subprocess.run(
        ["git", "ls-files", "-s", "*.pt"], cwd=ROOT, capture_output=True, text=True
    )
    if tracked.returncode != 0:  # an exported tree without git
        return
    modes = {line.split("\t")[1]: line.split()[0] for line in tracked.stdout.splitlines()}
    assert modes == {
        "examples/quickstart/model/checkpoint.pt": "120000",  # a symbolic link
        "examples/quickstart/model/teacher.pt": "100644",
        PACKAGED: "100644",
    }
    assert sorted(f"examples/quickstart/model/{n}" for n in EXPECTED) == sorted(modes)[:2]
    assert (MODEL / "checkpoint.pt").resolve() == (ROOT / PACKAGED).resolve()


def test_shipped_checkpoints_decode_as_when_committed(tmp_path):
    src, ref = read_sample("test", "en", N), read_sample("test", "de", N)
    data = binarize(MODEL / "spm.model", tmp_path, {"test": (src, ref)}, srcdict=MODEL / "dict.txt")
    common = [
        data,
        "--user-dir",
        USER_DIR,
        "-s",
        "en",
        "-t",
        "de",
        "--gen-subset",
        "test",
        "--batch-size",
        "8",
    ]
    student = run(
        [
            "fairseq-generate",
            *common,
            "--task",
            "cmlm_hybrid",
            "--path",
            MODEL / "checkpoint.pt",
            "--iter-decode-max-iter",
            "4",
            "--iter-decode-with-beam",
            "2",
        ]
    )
    teacher = run(
        [
            "fairseq-generate",
            *common,
            "--task",
            "translation",
            "--path",
            MODEL / "teacher.pt",
            "--beam",
            "4",
        ]
    )
    assert hypotheses(student.stdout) == EXPECTED["checkpoint.pt"]
    assert hypotheses(teacher.stdout) == EXPECTED["teacher.pt"]
