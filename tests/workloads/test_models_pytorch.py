"""Model structure of the pytorch workloads: sizes, shapes and behaviour each model must have.

Training at --size tiny is checked for every pair in test_train.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workloads.runner import run_workload

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

# Parameter counts need the parameters' shapes only: models built on the meta device
# allocate and initialise nothing (the paper sizes took seconds on the CPU).
META = "meta"


def test_network_is_the_four_layer_a3c_net() -> None:
    from workloads.pytorch import a3c

    net = a3c.ActorCritic(4)
    # conv 4->16 8x8, conv 16->32 4x4, fc 2592->256, policy 256->4, value 256->1.
    expected = (4 * 16 * 64 + 16) + (16 * 32 * 16 + 32) + (2592 * 256 + 256) + 1028 + 257
    assert sum(p.numel() for p in net.parameters()) == expected


def test_output_is_ctc_layout_at_half_frame_rate() -> None:
    import torch

    from workloads.pytorch import deepspeech2

    cfg = deepspeech2.CONFIGS["tiny"]
    net = deepspeech2.DeepSpeech2(cfg).eval()
    out = net(torch.randn(3, 1, cfg.freq_bins, 21))
    assert out.shape == (11, 3, deepspeech2.CHARS)  # ceil(21 / 2) frames
    assert torch.allclose(out.exp().sum(-1), torch.ones(11, 3), atol=1e-5)


def test_synthetic_speech_is_learnable(tmp_path: Path) -> None:
    run = run_workload(
        "workloads.pytorch.deepspeech2",
        tmp_path,
        "--steps",
        "40",
        "--warmup",
        "0",
        "--batch-size",
        "8",
        "--device",
        "cpu",
        "--seed",
        "0",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    losses = [r["loss"] for r in run.records]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.75 * first, (first, last)  # CTC learns the character templates


def test_paper_size_is_resnet50_fpn_with_voc_head() -> None:
    import torch

    from workloads.pytorch import faster_rcnn

    with torch.device(META):
        net = faster_rcnn.build_model(faster_rcnn.CONFIGS["paper"])
    # torchvision documents 41,755,286 parameters for the COCO model (91 classes, frozen
    # batch-norm). VOC's 21 classes shrink the predictor by 70 x 1025 (scores) and
    # 280 x 1025 (boxes); trainable batch-norm adds 2 x 26,560 ResNet-50 BN channels.
    expected = 41_755_286 - 70 * 1025 - 280 * 1025 + 2 * 26_560
    assert sum(p.numel() for p in net.parameters()) == expected


def test_paper_size_is_inception_v3_without_the_aux_head() -> None:
    import torch

    from workloads.pytorch import inception_v3

    cfg = inception_v3.CONFIGS["paper"]
    with torch.device(META):
        net = inception_v3.build_model(cfg)
    # torchvision's documented parameter count for Inception-v3 (27,161,264) less its
    # auxiliary head: 1x1 conv 768->128 + BN, 5x5 conv 128->768 + BN, fc 768->1000.
    aux = (768 * 128 + 2 * 128) + (128 * 768 * 25 + 2 * 768) + (768 * 1000 + 1000)
    assert sum(p.numel() for p in net.parameters()) == 27_161_264 - aux
    assert cfg.image_px == 299


def test_paper_size_is_resnet50_on_imagenet() -> None:
    import torch

    from workloads.pytorch import resnet50

    with torch.device(META):
        net = resnet50.build_model(resnet50.CONFIGS["paper"])
    # torchvision's documented parameter count for ResNet-50 (ImageNet-1k head).
    assert sum(p.numel() for p in net.parameters()) == 25_557_032
    assert resnet50.CONFIGS["paper"].image_px == 224


def test_attention_ignores_source_padding() -> None:
    import torch

    from workloads.pytorch import seq2seq

    torch.manual_seed(0)
    net = seq2seq.Seq2Seq(seq2seq.CONFIGS["tiny"]).eval()
    src = torch.tensor([[5, 6, 7, 0, 0]])
    padded_other = torch.tensor([[5, 6, 7, 9, 9]])  # different tokens behind the length
    tgt = torch.tensor([[1, 8, 9]])
    n = torch.tensor([3])
    with torch.no_grad():
        a, b = net(src, n, tgt), net(padded_other, n, tgt)
    assert a.shape == (1, 3, seq2seq.CONFIGS["tiny"].tgt_vocab)
    assert torch.allclose(a, b)


def test_reversal_task_is_learnable(tmp_path: Path) -> None:
    run = run_workload(
        "workloads.pytorch.seq2seq",
        tmp_path,
        "--steps",
        "60",
        "--warmup",
        "0",
        "--batch-size",
        "16",
        "--device",
        "cpu",
        "--seed",
        "0",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    losses = [r["loss"] for r in run.records]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.9 * first, (first, last)


def _transformer_params(d: int, ff: int, vocab: int, layers: int) -> int:
    """Parameter count of the encoder-decoder, written out from the architecture."""
    mha = 4 * d * d + 4 * d  # in-projection (q, k, v) and out-projection, with biases
    ffn = 2 * d * ff + ff + d
    ln = 2 * d
    enc = layers * (mha + ffn + 2 * ln) + ln  # + final encoder norm
    dec = layers * (2 * mha + ffn + 3 * ln) + ln
    return vocab * d + enc + dec  # one embedding, shared by the softmax (no bias)


def test_paper_size_is_transformer_base() -> None:
    import torch

    from workloads.pytorch import transformer

    cfg = transformer.CONFIGS["paper"]
    assert (cfg.d_model, cfg.heads, cfg.layers, cfg.ff) == (512, 8, 6, 2048)
    with torch.device(META):
        net = transformer.TransformerNMT(cfg)
    assert sum(p.numel() for p in net.parameters()) == _transformer_params(512, 2048, cfg.vocab, 6)


def test_paper_size_is_dcgan_64() -> None:
    import torch

    from workloads.pytorch import wgan

    cfg = wgan.CONFIGS["paper"]
    g, d = wgan.generator(cfg), wgan.critic(cfg)
    # The DCGAN 64x64 networks (nz 100, 64 filters): 3,576,704 and 2,765,568 parameters,
    # as counted layer by layer in the DCGAN reference.
    assert sum(p.numel() for p in g.parameters()) == 3_576_704
    assert sum(p.numel() for p in d.parameters()) == 2_765_568
    img = g(torch.randn(2, cfg.nz, 1, 1))
    assert img.shape == (2, 3, 64, 64)
    assert d(img).shape == (2,)
