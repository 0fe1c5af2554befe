"""``--unsorted-batches`` (``fairseq_ext.data.unsorted_batches``) on both pair tasks: every
training pair in exactly one batch, as with fairseq's length-sorted batches, but a batch mixes
lengths, and the batches stay within --max-tokens."""
import numpy as np
import pytest

from tests.conftest import USER_DIR

TASKS = [("translation_prophetnet", "prophetnet_tiny"), ("unilm_seq2seq", "unilm_transformer_tiny")]


def _train_batches(tiny_data, task, arch, *extra):
    from fairseq import options, tasks

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(tiny_data), "--user-dir", USER_DIR, "--task", task, "-s", "en", "-t", "de",
        "--arch", arch, "--max-tokens", "400", "--seed", "3", *extra])
    task = tasks.setup_task(args)
    task.load_dataset("train")
    dataset = task.dataset("train")
    itr = task.get_batch_iterator(dataset=dataset, max_tokens=400, max_positions=(1024, 1024), seed=3,
                                  disable_iterator_cache=True)
    return dataset, [batch for batch in itr.batch_sampler]


@pytest.mark.parametrize("task,arch", TASKS)
def test_unsorted_batches_mix_lengths_and_keep_every_pair(tiny_data, task, arch):
    dataset, sorted_batches = _train_batches(tiny_data, task, arch)
    unsorted_dataset, unsorted = _train_batches(tiny_data, task, arch, "--unsorted-batches")
    assert np.array_equal(unsorted_dataset.src_sizes, dataset.src_sizes)  # the wrapper reports the pairs' sizes
    for batches in (sorted_batches, unsorted):
        ids = np.concatenate(batches)
        assert sorted(ids.tolist()) == list(range(len(dataset)))

    def spread(batches):  # fairseq sorts by source length (ties by target length)
        return np.mean([dataset.src_sizes[b].max() - dataset.src_sizes[b].min() for b in batches])

    assert spread(sorted_batches) < 3 and spread(unsorted) > 5 * spread(sorted_batches)
    length = np.maximum(dataset.src_sizes, dataset.tgt_sizes)
    assert all(length[b].max() * len(b) <= 400 for b in unsorted)  # padded tokens within --max-tokens
