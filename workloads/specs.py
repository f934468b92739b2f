"""One definition of record per TBD model, shared by its PyTorch, TensorFlow and MXNet
workloads: layer sizes, vocabularies, sequence lengths, batch, optimizer settings and
learning-rate schedule per size (tiny, small, paper).

Each framework module takes its model's sizes from here (``Config = specs.ResNet50``,
``CONFIGS = specs.RESNET50.configs``, ``BATCH = specs.RESNET50.batch``), so the three
implementations of a model cannot drift apart; tests/workloads/test_specs.py checks that
their parameter counts agree at every size and that ``paper`` matches the published count
(:data:`PUBLISHED`, with its source; docs/WORKLOADS.md).

Standard library only: the harness and every framework venv import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

C = TypeVar("C")


@dataclass(frozen=True)
class Spec(Generic[C]):
    """A model's configuration and default mini-batch per size."""

    configs: dict[str, C]
    batch: dict[str, int]


@dataclass(frozen=True)
class Published:
    """A published parameter count and where it comes from."""

    params: int
    source: str


@dataclass(frozen=True)
class ResNet50:
    image_px: int  # input height = width
    classes: int  # output classes
    lr: float  # SGD learning rate


RESNET50 = Spec(
    {
        "tiny": ResNet50(64, 10, 0.001),
        "small": ResNet50(128, 100, 0.005),
        "paper": ResNet50(224, 1000, 0.0125),
    },
    {"tiny": 4, "small": 16, "paper": 32},
)


@dataclass(frozen=True)
class InceptionV3:
    image_px: int  # input height = width (>= 75)
    classes: int  # output classes
    lr: float  # RMSprop learning rate


INCEPTION_V3 = Spec(
    {
        "tiny": InceptionV3(96, 10, 0.001),
        "small": InceptionV3(299, 100, 0.045),
        "paper": InceptionV3(299, 1000, 0.045),
    },
    # tiny: batch 8, not 2. At 96 px the last blocks (Mixed_7b/7c) run on a 1x1 grid, where
    # batch-norm over 2 samples maps every channel to +1 or -1 and the net cannot learn; with
    # 8 it reaches the tiny accuracy target in about 120 steps (docs/WORKLOADS.md).
    {"tiny": 8, "small": 8, "paper": 32},
)


@dataclass(frozen=True)
class Seq2Seq:
    src_vocab: int  # source vocabulary (ids 0..2 are pad, begin, end)
    tgt_vocab: int  # target vocabulary
    hidden: int  # embedding and LSTM width
    layers: int  # encoder layers (= decoder layers), >= 2
    min_len: int  # shortest source sentence, tokens
    max_len: int  # longest source sentence, tokens
    lr: float  # Adam learning rate


SEQ2SEQ = Spec(
    {
        "tiny": Seq2Seq(32, 32, 32, 2, 4, 8, 3e-3),
        "small": Seq2Seq(1000, 1000, 256, 2, 10, 30, 1e-3),
        "paper": Seq2Seq(17191, 7709, 512, 2, 10, 50, 1e-3),
    },
    {"tiny": 4, "small": 32, "paper": 128},
)

TRANSFORMER_DROPOUT = 0.1  # transformer_base's


@dataclass(frozen=True)
class Transformer:
    """tensor2tensor's ``transformer_base`` shape: pre-norm encoder-decoder, one embedding
    shared by source, target and the softmax."""

    vocab: int  # shared source/target vocabulary (ids 0..2 are pad, begin, end)
    d_model: int  # model width
    heads: int  # attention heads
    layers: int  # encoder layers (= decoder layers)
    ff: int  # feed-forward inner width
    min_len: int  # shortest source sentence, tokens
    max_len: int  # longest source sentence, tokens
    warmup_steps: int  # learning-rate warm-up, optimizer steps
    lr_scale: float = 1.0  # multiplies the schedule (t2t's learning-rate constant)
    dropout: float = TRANSFORMER_DROPOUT  # residual, embedding and attention dropout


TRANSFORMER = Spec(
    {
        # tiny: the unscaled schedule would peak at 32^-0.5 * 10^-0.5 = 0.056, where this
        # net does not learn; here it warms up over 30 steps to a peak of 1e-2, then decays,
        # and has no dropout (with 0.1 it had not learnt the task after 400 steps)
        "tiny": Transformer(32, 32, 2, 2, 64, 4, 8, 30, 1e-2 * 32**0.5 * 30**0.5, 0.0),
        "small": Transformer(8000, 256, 4, 3, 1024, 10, 30, 400),
        # WMT En-De with t2t's 2^15 subword vocabulary (translate_ende_wmt32k)
        "paper": Transformer(32768, 512, 8, 6, 2048, 10, 32, 4000),
    },
    # paper: 64 sentences of up to 32 tokens, about t2t's 2048 tokens per batch
    {"tiny": 4, "small": 32, "paper": 64},
)


@dataclass(frozen=True)
class DeepSpeech2:
    freq_bins: int  # spectrogram frequency bins
    rnn_layers: int  # GRU layers
    hidden: int  # GRU width (per direction; bidirectional directions are summed)
    bidirectional: bool  # GRUs read both ways (deepspeech.pytorch) or forward only (MLPerf)
    padded_conv: bool  # the front end pads its convolutions (else valid convolutions)
    min_chars: int  # shortest transcript, characters
    max_chars: int  # longest transcript, characters
    lr: float  # AdamW learning rate

    def conv_freq(self) -> int:
        """Frequency rows after the front end: kernels 41 and 21, stride 2 each."""
        if self.padded_conv:
            half = (self.freq_bins + 1) // 2  # ceil(F / 2), then ceil of its half
            return (half + 1) // 2
        return ((self.freq_bins - 41) // 2 + 1 - 21) // 2 + 1

    def conv_frames(self, frames: Any) -> Any:
        """Frames after the front end (kernels 11, time strides 2 then 1): the CTC input
        length. ``frames`` is an int or an integer array/tensor of any framework."""
        if self.padded_conv:
            return (frames + 1) // 2
        return (frames - 11) // 2 + 1 - 10


DEEPSPEECH2 = Spec(
    {
        "tiny": DeepSpeech2(32, 2, 32, True, True, 3, 5, 1e-3),
        "small": DeepSpeech2(81, 3, 256, True, True, 8, 20, 3e-4),
        # MLPerf's reference (TBD's Deep Speech 2): 161 bins, 3 unidirectional GRU layers
        # of 2560, valid convolutions; transcripts of 100-300 characters (4-8 frames of
        # 10 ms each: 4-24 s, LibriSpeech's utterance lengths)
        "paper": DeepSpeech2(161, 3, 2560, False, False, 100, 300, 1.5e-4),
    },
    {"tiny": 2, "small": 8, "paper": 32},
)


@dataclass(frozen=True)
class WGAN:
    image_px: int  # image height = width, a power of two >= 16
    nz: int  # latent size
    filters: int  # ngf = ndf, the widest layer is filters * image_px / 8
    n_critic: int  # critic updates per generator update
    lr: float  # RMSprop learning rate (both nets)
    clip: float  # critic weights are clipped to [-clip, clip]


WGAN_SPEC = Spec(
    {
        "tiny": WGAN(16, 16, 16, 5, 5e-5, 0.01),
        "small": WGAN(32, 64, 32, 5, 5e-5, 0.01),
        "paper": WGAN(64, 100, 64, 5, 5e-5, 0.01),
    },
    {"tiny": 8, "small": 32, "paper": 64},
)


@dataclass(frozen=True)
class FasterRCNN:
    image_px: int  # synthetic image height = width
    min_size: int  # detector transform: shorter side resized to this
    max_size: int  # detector transform: longer side at most this
    classes: int  # object classes, background excluded
    rpn_pre_nms: int  # RPN proposals kept before NMS (per image, training)
    rpn_post_nms: int  # RPN proposals kept after NMS (per image, training)
    roi_samples: int  # RoI-head samples per image
    lr: float  # SGD learning rate


FASTER_RCNN = Spec(
    {
        "tiny": FasterRCNN(64, 64, 96, 3, 200, 100, 64, 0.005),
        "small": FasterRCNN(320, 320, 512, 20, 2000, 2000, 512, 0.01),
        "paper": FasterRCNN(600, 600, 1000, 20, 2000, 2000, 512, 0.01),
    },
    {"tiny": 2, "small": 2, "paper": 2},
)


@dataclass(frozen=True)
class A3C:
    t_max: int  # environment steps per worker per update


A3C_SPEC = Spec(
    {"tiny": A3C(5), "small": A3C(5), "paper": A3C(5)}, {"tiny": 2, "small": 4, "paper": 8}
)


# Published parameter counts of the paper-size models: (count, source). A model whose
# published count depends on a choice the source leaves open says which choice is counted.
PUBLISHED = {
    "resnet50": Published(
        25_557_032, "torchvision resnet50 (ImageNet-1k head), He et al. 2016 architecture"
    ),
    "inception_v3": Published(
        23_834_568,
        "torchvision inception_v3 without the auxiliary classifier (27,161,264 with it); "
        "Keras InceptionV3: 23,817,352 trainable",
    ),
    "transformer": Published(
        61_500_000,
        "tensor2tensor transformer_base on WMT En-De: about 61-62 million "
        "(tensor2tensor issue #1240); Vaswani et al. 2017 list 65 million for a 37k vocabulary",
    ),
    "deepspeech2": Published(
        103_851_808,
        "MLPerf training v0.5 speech_recognition reference (deepspeech.pytorch model, "
        "rnn_hidden_size 2560, nb_layers 3, GRU, unidirectional), TBD's Deep Speech 2",
    ),
}
