"""Tests written for mutants of mrecord/sampling/arguments.py that survived the sampling tests
(docs/RELIABILITY.md, "Mutation testing"): MindSpore's rules for a dataset's sampling
arguments, each refusal with MindSpore's error message, whole, and each bound at its edge."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mrecord.arguments import INT32_MAX
from mrecord.errors import ArgumentError, SamplerError, WrongTypeError
from mrecord.sampling.arguments import sampler_from_args
from mrecord.sampling.samplers import DatasetSampler, SequentialSampler
from mrecord.sampling.shuffle import Shuffle

_NONE: dict[str, Any] = {"shuffle": None, "num_shards": None, "shard_id": None}


def _message(error: type[BaseException], **kwargs: Any) -> str:
    with pytest.raises(error) as info:
        sampler_from_args(**{**_NONE, "num_samples": None, **kwargs})
    return str(info.value)


def test_a_shuffle_that_is_not_a_bool_or_mode_is_refused_with_or_without_a_sampler() -> None:
    message = (
        "shuffle must be of boolean or enum of 'Shuffle' values like 'Shuffle.GLOBAL' or "
        "'Shuffle.FILES' or 'Shuffle.INFILE'. Got 'yes'."
    )
    assert _message(WrongTypeError, shuffle="yes") == message
    assert _message(WrongTypeError, shuffle="yes", sampler=SequentialSampler()) == message


def test_a_sampler_excludes_the_other_arguments_with_mindspores_messages() -> None:
    sampler = SequentialSampler()
    assert sampler_from_args(**_NONE, num_samples=None, sampler=sampler) is sampler
    assert _message(WrongTypeError, sampler=3) == "sampler must be a mrecord sampler, got 3 (int)"
    assert _message(SamplerError, sampler=sampler, shuffle=False) == (
        "sampler and shuffle cannot be specified at the same time."
    )
    for sharding in ({"num_shards": 2}, {"shard_id": 0}, {"num_shards": 2, "shard_id": 0}):
        assert _message(SamplerError, sampler=sampler, **sharding) == (
            "sampler and sharding cannot be specified at the same time."
        )
    assert _message(SamplerError, sampler=sampler, num_samples=3) == (
        "sampler and num_samples cannot be specified at the same time."
    )
    assert _message(SamplerError, sampler=sampler, num_padded=1) == (
        "sampler and num_padded cannot be specified at the same time; "
        "padding needs num_shards and shard_id."
    )


@pytest.mark.parametrize("name", ["num_shards", "shard_id", "num_samples"])
def test_integer_arguments_of_the_wrong_type_are_named_with_their_value(name: str) -> None:
    kwargs: dict[str, Any] = {"num_shards": 4, "shard_id": 1, name: 2.0}
    assert _message(WrongTypeError, **kwargs) == (
        f"Argument {name} with value 2.0 is not of type [<class 'int'>], but got <class 'float'>."
    )


def test_sharding_bounds_are_mindspores() -> None:
    assert _message(ArgumentError, num_shards=0, shard_id=0) == (
        f"Input num_shards is not within the required interval of [1, {INT32_MAX}]."
    )
    assert _message(ArgumentError, num_shards=INT32_MAX + 1, shard_id=0).startswith(
        "Input num_shards is not within"
    )
    top = sampler_from_args(**_NONE | {"num_shards": INT32_MAX, "shard_id": INT32_MAX - 1},
                            num_samples=None)  # fmt: skip
    assert isinstance(top, DatasetSampler)
    assert (top.num_shards, top.shard_id) == (INT32_MAX, INT32_MAX - 1)
    assert _message(SamplerError, num_shards=2) == (
        "num_shards is specified and currently requires shard_id as well."
    )
    assert _message(SamplerError, shard_id=0) == "shard_id is specified but num_shards is not."
    for shard_id in (-1, 4, 5):
        assert _message(ArgumentError, num_shards=4, shard_id=shard_id) == (
            "Input shard_id is not within the required interval of [0, 3]."
        )
        # MindSpore raises ValueError here, not RuntimeError (as SamplerError also is)
        with pytest.raises(ArgumentError) as info:
            sampler_from_args(shuffle=None, num_shards=4, shard_id=shard_id, num_samples=None)
        assert not isinstance(info.value, RuntimeError)
    sampler = sampler_from_args(**_NONE | {"num_shards": np.int64(4), "shard_id": np.int8(3)},
                                num_samples=None)  # fmt: skip
    assert isinstance(sampler, DatasetSampler)
    assert (sampler.num_shards, sampler.shard_id) == (4, 3)
    assert type(sampler.num_shards) is int and type(sampler.shard_id) is int


def test_num_samples_bounds_are_mindspores() -> None:
    message = f"Input num_samples is not within the required interval of [0, {INT32_MAX}]."
    assert _message(ArgumentError, num_samples=-1) == message
    assert _message(ArgumentError, num_samples=INT32_MAX + 1) == message
    for n in (0, INT32_MAX):
        sampler = sampler_from_args(**_NONE, num_samples=n)
        assert isinstance(sampler, DatasetSampler) and sampler.num_samples == n


def test_files_and_infile_shuffles_exclude_num_samples() -> None:
    for mode in (Shuffle.FILES, Shuffle.INFILE):
        assert _message(ArgumentError, shuffle=mode, num_samples=5) == (
            "'Shuffle.FILES' or 'Shuffle.INFILE' and 'num_samples' "
            "cannot be specified at the same time."
        )


def test_the_dataset_sampler_gets_every_argument() -> None:
    sampler = sampler_from_args(
        shuffle=Shuffle.PARTIAL,
        num_shards=3,
        shard_id=2,
        num_samples=7,
        num_padded=2,
        partial_window=1234,
        adaptive_threshold=5678,
    )
    assert isinstance(sampler, DatasetSampler)
    assert (sampler.mode, sampler.num_shards, sampler.shard_id) == (Shuffle.PARTIAL, 3, 2)
    assert (sampler.num_samples, sampler.num_padded) == (7, 2)
    assert (sampler.partial_window, sampler.adaptive_threshold) == (1234, 5678)
    modes = {True: Shuffle.GLOBAL, False: None, None: Shuffle.ADAPTIVE}
    for shuffle, mode in modes.items():
        made = sampler_from_args(shuffle=shuffle, num_shards=None, shard_id=None, num_samples=None)
        assert isinstance(made, DatasetSampler) and made.mode is mode
        assert (made.num_shards, made.shard_id, made.num_samples) == (1, 0, None)
