"""``--unsorted-batches`` (``fairseq_ext.data.unsorted_batches``) on both pair tasks: every
training pair in exactly one batch, as with fairseq's length-sorted batches, but a batch mixes
lengths, and the batches stay within --max-tokens; the batches of an epoch depend on --seed and
the epoch only, so a run resumed in another process trains on what one uninterrupted run does."""

import numpy as np
import pytest

from tests.conftest import USER_DIR

TASKS = [("translation_prophetnet", "prophetnet_tiny"), ("unilm_seq2seq", "unilm_transformer_tiny")]


def _train_task(tiny_data, task, arch, *extra):
    from fairseq import options, tasks

    args = options.parse_args_and_arch(
        options.get_training_parser(),
        [
            str(tiny_data),
            "--user-dir",
            USER_DIR,
            "--task",
            task,
            "-s",
            "en",
            "-t",
            "de",
            "--arch",
            arch,
            "--max-tokens",
            "400",
            "--seed",
            "3",
            *extra,
        ],
    )
    task = tasks.setup_task(args)
    task.load_dataset("train")
    return task, task.dataset("train")


def _epoch_iterator(task, dataset, epoch=1, **cache):
    """The task's iterator for ``epoch`` under the settings ``_train_task`` parsed."""
    return task.get_batch_iterator(
        dataset=dataset, max_tokens=400, max_positions=(1024, 1024), seed=3, epoch=epoch, **cache
    )


def _train_batches(tiny_data, task, arch, *extra):
    task, dataset = _train_task(tiny_data, task, arch, *extra)
    itr = _epoch_iterator(task, dataset, disable_iterator_cache=True)
    return dataset, [batch for batch in itr.batch_sampler]


@pytest.mark.parametrize("task,arch", TASKS)
def test_unsorted_batches_mix_lengths_and_keep_every_pair(tiny_data, task, arch):
    dataset, sorted_batches = _train_batches(tiny_data, task, arch)
    unsorted_dataset, unsorted = _train_batches(tiny_data, task, arch, "--unsorted-batches")
    assert np.array_equal(
        unsorted_dataset.src_sizes, dataset.src_sizes
    )  # the wrapper reports the pairs' sizes
    for batches in (sorted_batches, unsorted):
        ids = np.concatenate(batches)
        assert sorted(ids.tolist()) == list(range(len(dataset)))

    def spread(batches):  # fairseq sorts by source length (ties by target length)
        return np.mean([dataset.src_sizes[b].max() - dataset.src_sizes[b].min() for b in batches])

    assert spread(sorted_batches) < 3 and spread(unsorted) > 5 * spread(sorted_batches)
    length = np.maximum(dataset.src_sizes, dataset.tgt_sizes)
    assert all(
        length[b].max() * len(b) <= 400 for b in unsorted
    )  # padded tokens within --max-tokens


def _epoch_ids(itr) -> list[tuple]:
    """The pair ids of each batch of the iterator's next epoch, in the order training meets them."""
    return [tuple(sample["id"].tolist()) for sample in itr.next_epoch_itr(shuffle=True)]


@pytest.mark.parametrize("task,arch", TASKS)
def test_an_epochs_batches_are_the_same_in_one_process_and_in_a_process_resumed_at_that_epoch(
    tiny_data, task, arch
):
    # one process, as fairseq_cli.train asks for each epoch's iterator
    one_task, dataset = _train_task(tiny_data, task, arch, "--unsorted-batches")
    itr, one_process = _epoch_iterator(one_task, dataset, 1), []
    for epoch in (1, 2, 3):
        if epoch > 1:
            itr = _epoch_iterator(one_task, dataset, itr.next_epoch_idx)
        one_process.append(_epoch_ids(itr))
    for epoch, batches in enumerate(one_process, start=1):
        assert sorted(i for b in batches for i in b) == list(range(len(dataset))), (
            f"epoch {epoch} misses or repeats pairs"
        )
        resumed_task, resumed_dataset = _train_task(tiny_data, task, arch, "--unsorted-batches")
        assert _epoch_ids(_epoch_iterator(resumed_task, resumed_dataset, epoch)) == batches, (
            f"epoch {epoch}"
        )
    # the pairs are cut into other batches at each epoch, not only met in another order
    compositions = [{frozenset(b) for b in batches} for batches in one_process]
    assert len({frozenset(c) for c in compositions}) == 3, (
        "two of the three epochs cut the same batches"
    )
