"""A dataset's sampling arguments to a sampler, with MindSpore's rules and messages.

``MindDataset`` and ``GeneratorDataset`` take ``shuffle``, ``num_shards``, ``shard_id``,
``num_samples``, ``sampler`` and ``num_padded``; :func:`sampler_from_args` checks how
they combine (MindSpore's error types and messages) and returns the one sampler that
implements them.
"""

from __future__ import annotations

from mrecord.arguments import INT32_MAX, is_int
from mrecord.arguments import type_error as int_type_error
from mrecord.errors import ArgumentError, SamplerError, WrongTypeError
from mrecord.sampling.samplers import DatasetSampler, Sampler
from mrecord.sampling.shuffle import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_PARTIAL_WINDOW,
    Shuffle,
    parse_shuffle,
)

__all__ = ["sampler_from_args"]


def sampler_from_args(
    *,
    shuffle: bool | Shuffle | None,
    num_shards: int | None,
    shard_id: int | None,
    num_samples: int | None,
    sampler: Sampler | None = None,
    num_padded: int = 0,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
) -> Sampler:
    """The sampler for MindDataset/GeneratorDataset-style arguments, with MindSpore's rules.

    ``shuffle``: True = GLOBAL, False = none, None = ADAPTIVE, or a :class:`Shuffle`.
    ``sampler`` excludes shuffle, sharding, num_samples and padding (SamplerError);
    ``num_shards`` and ``shard_id`` come together; ``shard_id`` must be in
    ``[0, num_shards - 1]`` (ValueError); FILES/INFILE exclude ``num_samples``.
    ``num_padded`` padded ids (``>= N``) are appended before the shard split.
    """
    if shuffle is not None and not isinstance(shuffle, (bool, Shuffle)):
        parse_shuffle(shuffle)  # raises MindSpore's TypeError
    if sampler is not None:
        if not isinstance(sampler, Sampler):
            raise WrongTypeError(
                f"sampler must be a mrecord sampler, got {sampler!r} ({type(sampler).__name__})"
            )
        if shuffle is not None:
            raise SamplerError("sampler and shuffle cannot be specified at the same time.")
        if num_shards is not None or shard_id is not None:
            raise SamplerError("sampler and sharding cannot be specified at the same time.")
        if num_samples is not None:
            raise SamplerError("sampler and num_samples cannot be specified at the same time.")
        if num_padded:
            raise SamplerError(
                "sampler and num_padded cannot be specified at the same time; "
                "padding needs num_shards and shard_id."
            )
        return sampler
    k, s = 1, 0
    if num_shards is not None:
        if not is_int(num_shards):
            raise int_type_error("num_shards", num_shards, "<class 'int'>")
        if not 1 <= num_shards <= INT32_MAX:
            raise ArgumentError(
                f"Input num_shards is not within the required interval of [1, {INT32_MAX}]."
            )
        if shard_id is None:
            raise SamplerError("num_shards is specified and currently requires shard_id as well.")
        if not is_int(shard_id):
            raise int_type_error("shard_id", shard_id, "<class 'int'>")
        if not 0 <= shard_id <= num_shards - 1:
            raise ArgumentError(
                f"Input shard_id is not within the required interval of [0, {num_shards - 1}]."
            )
        k, s = int(num_shards), int(shard_id)
    elif shard_id is not None:
        raise SamplerError("shard_id is specified but num_shards is not.")
    if num_samples is not None:
        if not is_int(num_samples):
            raise int_type_error("num_samples", num_samples, "<class 'int'>")
        if not 0 <= num_samples <= INT32_MAX:
            raise ArgumentError(
                f"Input num_samples is not within the required interval of [0, {INT32_MAX}]."
            )
    mode = parse_shuffle(shuffle)
    if num_samples is not None and mode in (Shuffle.FILES, Shuffle.INFILE):
        raise ArgumentError(
            "'Shuffle.FILES' or 'Shuffle.INFILE' and 'num_samples' "
            "cannot be specified at the same time."
        )
    return DatasetSampler(
        mode,
        num_shards=k,
        shard_id=s,
        num_samples=num_samples,
        num_padded=num_padded,
        partial_window=partial_window,
        adaptive_threshold=adaptive_threshold,
    )
