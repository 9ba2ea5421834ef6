"""Parameter counts of the reference architectures equal FastEstimator 1.7's.

The expected numbers are derived by hand below from FastEstimator's layer definitions, not read off our models.
Notation: a k x k convolution from a to b channels has k*k*a*b weights (+ b with a bias); a batch norm over c
channels has 2c trainable weights (gamma, beta) and, in Keras only, 2c non-trainable ones (moving mean and
variance; PyTorch keeps those as buffers, which ``parameters()`` does not list); a dense layer a -> b has a*b + b.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def conv(a: int, b: int, k: int = 3, bias: bool = True) -> int:
    return k * k * a * b + (b if bias else 0)


# ResNet9, 3 input channels, 10 classes. "unit" = conv3x3 (with bias) + batch norm (2c trainable).
_UNIT = {(a, b): conv(a, b) + 2 * b for a, b in [(3, 64), (64, 128), (128, 128), (128, 256), (256, 256),
                                                 (256, 512), (512, 512)]}
# prep 1,920 + layer1 74,112 + 2 units(128) 295,680 + layer2 295,680 + layer3 1,181,184 + 2 units(512) 4,721,664
# + dense 512*10+10 = 5,130.
_RESNET9_SHARED = (_UNIT[3, 64] + _UNIT[64, 128] + 2 * _UNIT[128, 128] + _UNIT[128, 256] + _UNIT[256, 512]
                   + 2 * _UNIT[512, 512] + 512 * 10 + 10)
TORCH_RESNET9 = _RESNET9_SHARED + 2 * _UNIT[256, 256]  # the PyTorch one also has a residual block at 256 channels
TF_RESNET9_TRAINABLE = _RESNET9_SHARED
TF_RESNET9_ALL = TF_RESNET9_TRAINABLE + 2 * (64 + 128 + 2 * 128 + 256 + 512 + 2 * 512)  # moving mean / variance

# UNet, 1 input and 1 output channel, every conv with bias:
# encoder 1->64->64, 64->128->128, 128->256->256, 256->512->512; bottleneck 512->1024->1024, up-conv 1024->512;
# decoders (in -> mid -> mid, up-conv mid -> out): 1024-512-512-256, 512-256-256-128, 256-128-128-64;
# head 128->64->64 and a 1x1 conv 64->1. Same in both frameworks (no batch norm).
UNET = (conv(1, 64) + conv(64, 64) + conv(64, 128) + conv(128, 128) + conv(128, 256) + conv(256, 256)
        + conv(256, 512) + conv(512, 512) + conv(512, 1024) + conv(1024, 1024) + conv(1024, 512)
        + conv(1024, 512) + conv(512, 512) + conv(512, 256) + conv(512, 256) + conv(256, 256) + conv(256, 128)
        + conv(256, 128) + conv(128, 128) + conv(128, 64) + conv(128, 64) + conv(64, 64) + conv(64, 1, k=1))

# AttentionUNet, 1 input channel: the UNet above plus an attention gate per skip connection. A gate over c channels
# has two 1x1 convs c->c with bias (2(c*c + c)), each with a batch norm (2 * 2c), and a 1x1 conv c->1 (c + 1) with
# a batch norm over 1 channel (2): 2c^2 + 7c + 3 trainable; Keras adds 2(c + c + 1) moving statistics.
ATTENTION_UNET = UNET + sum(2 * c * c + 7 * c + 3 for c in (64, 128, 256, 512))
TF_ATTENTION_UNET_ALL = ATTENTION_UNET + sum(2 * (2 * c + 1) for c in (64, 128, 256, 512))


def torch_wrn(depth: int, widen: int, classes: int) -> int:
    """PyTorch WRN: bias-free convs; each block has BN(in), conv(in, out), BN(out), conv(out, out) and a 1x1
    shortcut conv when in != out; a final BN and dense layer."""
    n, widths = (depth - 4) // 6, (16, 16 * widen, 32 * widen, 64 * widen)
    total = conv(3, 16, bias=False)
    for a, b in zip(widths[:-1], widths[1:]):
        total += 2 * a + conv(a, b, bias=False) + 2 * b + conv(b, b, bias=False) + (a * b if a != b else 0)
        total += (n - 1) * (2 * b + conv(b, b, bias=False) + 2 * b + conv(b, b, bias=False))
    return total + 2 * widths[3] + widths[3] * classes + classes


def tf_wrn(depth: int, widen: int, classes: int, channels: int = 3) -> tuple[int, int]:
    """Keras WRN, (trainable, all): bias-free convs each followed by BN(out) (2c trainable + 2c moving); each block
    is conv(in, out), conv(out, out) and a 1x1 shortcut conv when in != out; no final BN; a dense layer."""
    n, widths = (depth - 4) // 6, (16, 16 * widen, 32 * widen, 64 * widen)
    trainable, bn_channels = conv(channels, 16, bias=False) + 2 * 16, 16
    for a, b in zip(widths[:-1], widths[1:]):
        trainable += (a * b if a != b else 0) + conv(a, b, bias=False) + conv(b, b, bias=False) + 4 * b
        trainable += (n - 1) * (2 * conv(b, b, bias=False) + 4 * b)
        bn_channels += 2 * n * b
    trainable += widths[3] * classes + classes
    return trainable, trainable + 2 * bn_channels


def torch_count(model: object) -> int:
    return sum(p.numel() for p in model.parameters())


def keras_trainable(model: object) -> int:
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


def test_hand_derived_counts_are_fastestimators_published_sizes() -> None:
    """Sanity of the derivations: the well-known sizes of these networks."""
    assert TORCH_RESNET9 == 7_756_554
    assert (TF_RESNET9_TRAINABLE, TF_RESNET9_ALL) == (6_575_370, 6_579_850)
    assert UNET == 34_512_193
    assert (ATTENTION_UNET, TF_ATTENTION_UNET_ALL) == (35_215_245, 35_219_093)
    assert torch_wrn(28, 10, 10) == 36_479_194  # WRN-28-10, 36.5M as in the paper
    assert tf_wrn(28, 10, 10) == (36_479_194, 36_497_146)


def test_torch_defaults() -> None:
    pytest.importorskip("torch")
    from fe_ray.architecture.pytorch import AttentionUNet, ResNet9, UNet, WideResidualNetwork

    assert torch_count(AttentionUNet()) == ATTENTION_UNET
    assert torch_count(ResNet9()) == TORCH_RESNET9
    assert torch_count(UNet()) == UNET
    assert torch_count(WideResidualNetwork()) == torch_wrn(28, 10, 10)


def test_tf_defaults() -> None:
    pytest.importorskip("tensorflow")
    from fe_ray.architecture.tensorflow import AttentionUNet, ResNet9, UNet, WideResidualNetwork

    attention_unet = AttentionUNet()
    assert (keras_trainable(attention_unet), attention_unet.count_params()) == (ATTENTION_UNET, TF_ATTENTION_UNET_ALL)
    resnet9 = ResNet9()
    assert (keras_trainable(resnet9), resnet9.count_params()) == (TF_RESNET9_TRAINABLE, TF_RESNET9_ALL)
    assert UNet().count_params() == UNET
    wrn = WideResidualNetwork((32, 32, 3))
    assert (keras_trainable(wrn), wrn.count_params()) == tf_wrn(28, 10, 10)


@pytest.mark.parametrize("depth, widen, classes", [(10, 1, 10), (16, 2, 7), (22, 1, 100)])
def test_wide_residual_network_sizes_agree_across_frameworks(depth: int, widen: int, classes: int) -> None:
    """FastEstimator's two WRNs differ in layout (pre- vs post-activation, strided convs vs max-pools) but have the
    same number of trainable weights; so do ours."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fe_ray.architecture import pytorch, tensorflow

    torch_model = pytorch.WideResidualNetwork(depth=depth, classes=classes, widen_factor=widen)
    tf_model = tensorflow.WideResidualNetwork((8, 8, 3), depth=depth, widen_factor=widen, classes=classes)
    assert torch_count(torch_model) == torch_wrn(depth, widen, classes) == keras_trainable(tf_model)
    assert tf_model.count_params() == tf_wrn(depth, widen, classes)[1]


@pytest.mark.parametrize("channels, out", [(3, 2), (4, 5)])
def test_unet_sizes_agree_across_frameworks(channels: int, out: int) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fe_ray.architecture import pytorch, tensorflow

    extra = conv(channels, 64) - conv(1, 64) + conv(64, out, k=1) - conv(64, 1, k=1)
    assert torch_count(pytorch.UNet((channels, 16, 16), out)) == UNET + extra
    assert tensorflow.UNet((16, 16, channels), out).count_params() == UNET + extra


def test_resnet9_sizes_for_other_inputs_and_classes() -> None:
    """The global max-pool makes the size independent of height and width."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fe_ray.architecture import pytorch, tensorflow

    extra = conv(1, 64) - conv(3, 64) + 512 * 90 + 90  # one input channel, 100 classes
    assert torch_count(pytorch.ResNet9((1, 48, 16), 100)) == TORCH_RESNET9 + extra
    assert keras_trainable(tensorflow.ResNet9((48, 16, 1), 100)) == TF_RESNET9_TRAINABLE + extra
