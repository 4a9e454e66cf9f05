"""Image transforms, MindSpore's ``mindspore.dataset.vision`` names.

Every op is callable eagerly on a numpy ``<H, W, C>`` image and usable in ``dataset.map``.
Random ops take a per-row ``seed``; the offloadable ops (HWC2CHW, Normalize, Rescale,
RandomHorizontalFlip, RandomVerticalFlip, RandomColorAdjust, RandomSharpness) and the
batchable RandomCrop, HorizontalFlip and VerticalFlip also have a vectorized
``apply_batch``. OpenCV and simplejpeg, when installed, are fast paths for decoding and
resizing. See docs/TRANSFORMS.md.
"""

from __future__ import annotations

from mrecord.vision import (
    _fastimage,
    _fused,  # noqa: F401  (registers the fused image tail)
)
from mrecord.vision.color import RandomColorAdjust, RandomSharpness
from mrecord.vision.color_convert import ConvertColor, ConvertMode, Grayscale, Invert
from mrecord.vision.convert_type import ToPIL, ToTensor, ToType
from mrecord.vision.decode import Decode, RandomCropDecodeResize
from mrecord.vision.enums import Border, Inter, SliceMode
from mrecord.vision.flip import (
    HorizontalFlip,
    RandomHorizontalFlip,
    RandomVerticalFlip,
    VerticalFlip,
)
from mrecord.vision.geometry import CenterCrop, RandomCrop, RandomResizedCrop, Resize
from mrecord.vision.pad_crop import Crop, Pad, PadToSize, ResizedCrop
from mrecord.vision.pixel import HWC2CHW, Normalize, Rescale
from mrecord.vision.rotate import Rotate
from mrecord.vision.slice_patches import SlicePatches

# load the optional fast backends now rather than in the first pipeline run
_fastimage.opencv()
_fastimage.simplejpeg()

__all__ = [
    "HWC2CHW",
    "Border",
    "CenterCrop",
    "ConvertColor",
    "ConvertMode",
    "Crop",
    "Decode",
    "Grayscale",
    "HorizontalFlip",
    "Inter",
    "Invert",
    "Normalize",
    "Pad",
    "PadToSize",
    "RandomColorAdjust",
    "RandomCrop",
    "RandomCropDecodeResize",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomSharpness",
    "RandomVerticalFlip",
    "Rescale",
    "Resize",
    "ResizedCrop",
    "Rotate",
    "SliceMode",
    "SlicePatches",
    "ToPIL",
    "ToTensor",
    "ToType",
    "VerticalFlip",
]
