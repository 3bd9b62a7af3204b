"""Plain torch.nn definitions of the model families pipe-opt is tested on.

Each family has a real-size configuration (the published architecture) and a
tiny one with the same operators and topology but small widths, vocabularies
and images. `build` returns a model with example inputs and the stable input
and output names used for export.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Tuple

import torch

from pipe_opt.models import (bert, densenet, gpt2, inception, mlp, mobilenet, moe, recurrent,
                             resnet, transformer, unet, vgg)

SIZES = ("tiny", "real")


@dataclasses.dataclass
class BuiltModel:
    name: str
    model: torch.nn.Module
    example_inputs: Tuple[torch.Tensor, ...]
    input_names: List[str]
    output_names: List[str]


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    description: str
    configs: Dict[str, object]  # size -> config
    make: Callable[[object], torch.nn.Module]
    # Parameter count of the real configuration (the published one, where
    # the architecture has one).
    real_parameters: int


FAMILIES: Dict[str, Family] = {
    family.name: family
    for family in (
        Family("resnet50", "ResNet-50 (bottleneck v1.5)",
               {"tiny": resnet.TINY, "real": resnet.REAL}, resnet.ResNet, 25_557_032),
        Family("densenet121", "DenseNet-121",
               {"tiny": densenet.TINY, "real": densenet.REAL}, densenet.DenseNet, 7_978_856),
        Family("inception_v3", "Inception-v3 (with auxiliary classifier)",
               {"tiny": inception.TINY, "real": inception.REAL}, inception.InceptionV3,
               27_161_264),
        Family("vgg16", "VGG-16 (configuration D)",
               {"tiny": vgg.TINY, "real": vgg.REAL}, vgg.Vgg, 138_357_544),
        Family("mobilenet_v2", "MobileNet-v2 (width 1.0)",
               {"tiny": mobilenet.TINY, "real": mobilenet.REAL}, mobilenet.MobileNetV2,
               3_504_872),
        Family("gpt2", "GPT-2-style decoder (GPT-2 small, tied head)",
               {"tiny": gpt2.TINY, "real": gpt2.REAL}, gpt2.Gpt2, 124_439_808),
        Family("bert", "BERT-style encoder (BERT-base encoder + pooler)",
               {"tiny": bert.TINY, "real": bert.REAL}, bert.Bert, 109_482_240),
        # The 784-300-100-10 net of LeCun et al. 1998 (its count, by construction).
        Family("mlp", "Multi-layer perceptron (784-300-100-10)",
               {"tiny": mlp.TINY, "real": mlp.REAL}, mlp.Mlp, 266_610),
        # Transformer base with learned positions and a 37k shared vocabulary;
        # the paper rounds its base model to 65M (its Table 3).
        Family("transformer", "Encoder-decoder Transformer (base, shared embeddings)",
               {"tiny": transformer.TINY, "real": transformer.REAL}, transformer.Transformer,
               63_606_784),
        Family("moe", "Decoder with dense-softmax mixture-of-experts blocks (8 experts)",
               {"tiny": moe.TINY, "real": moe.REAL}, moe.MoeDecoder, 73_262_128),
        # The same decoder with a top-2 gate (Shazeer et al. 2017): TopK,
        # Softmax and ScatterElements in the graph; the same parameters.
        Family("moe_top2", "Decoder with top-2 gated mixture-of-experts blocks (8 experts)",
               {"tiny": moe.TOP2_TINY, "real": moe.TOP2_REAL}, moe.MoeDecoder, 73_262_128),
        # Padded convolutions with BatchNorm, transposed-convolution decoder:
        # 31,037,698 with 2 classes, as U-Net is usually trained.
        Family("unet", "U-Net (ConvTranspose decoder, padded convolutions, BatchNorm)",
               {"tiny": unet.TINY, "real": unet.REAL}, unet.UNet, 31_037_698),
        Family("fcn", "Fully convolutional segmentation net (bilinear Resize to the image)",
               {"tiny": unet.FCN_TINY, "real": unet.FCN_REAL}, unet.Fcn, 1_562_709),
        # Zaremba et al. 2014, medium: 2 x 650 LSTM units, 10k words.
        Family("lstm_lm", "LSTM language model (Zaremba et al. 2014, medium)",
               {"tiny": recurrent.LSTM_TINY, "real": recurrent.LSTM_REAL}, recurrent.LstmLm,
               19_780_400),
        Family("gru_tagger", "Bidirectional GRU sequence tagger",
               {"tiny": recurrent.GRU_TINY, "real": recurrent.GRU_REAL}, recurrent.GruTagger,
               2_369_217),
        # The perceptron with its cross-entropy inside the graph
        # (SoftmaxCrossEntropyLoss on a labels input): the same parameters.
        Family("mlp_loss", "Multi-layer perceptron with its loss in the graph",
               {"tiny": mlp.TINY, "real": mlp.REAL}, mlp.MlpWithLoss, 266_610),
    )
}

# Inception-v3 without its auxiliary classifier (what eval mode runs).
INCEPTION_V3_WITHOUT_AUX_PARAMETERS = 23_834_568

IMAGE_FAMILIES = ("resnet50", "densenet121", "inception_v3", "vgg16", "mobilenet_v2", "unet",
                  "fcn")


def build(name: str, size: str = "tiny", training: bool = True, batch: int = 2,
          seed: int = 0, config: object = None) -> BuiltModel:
    """Builds family `name` at `size` with deterministic weights and inputs.

    `config` replaces the family's configuration at `size` (a variant such as
    ResNet-101 or BERT-large). training=False drops parts that only run in training (Inception-v3's
    auxiliary classifier), so that every parameter appears in the graph.
    """
    if name not in FAMILIES:
        raise KeyError(f"unknown model '{name}'; known: {', '.join(FAMILIES)}")
    if size not in SIZES:
        raise KeyError(f"unknown size '{size}'; known: {', '.join(SIZES)}")
    family = FAMILIES[name]
    if config is None:  # else a variant of the family (e.g. ResNet-101, BERT-large)
        config = family.configs[size]
    if name == "inception_v3" and not training:
        config = dataclasses.replace(config, aux_logits=False)
    torch.manual_seed(seed)
    model = family.make(config)
    perturb_normalization(model)
    model.train(training)
    generator = torch.Generator().manual_seed(seed + 1)
    if name in IMAGE_FAMILIES:
        image = torch.randn(batch, 3, config.image_size, config.image_size, generator=generator)
        outputs = ["logits", "aux_logits"] if name == "inception_v3" and training else ["logits"]
        return BuiltModel(name, model, (image,), ["input"], outputs)
    if name == "mlp":
        features = torch.randn(batch, config.in_features, generator=generator)
        return BuiltModel(name, model, (features,), ["input"], ["logits"])
    if name == "mlp_loss":
        features = torch.randn(batch, config.in_features, generator=generator)
        labels = torch.randint(0, config.num_classes, (batch,), generator=generator)
        return BuiltModel(name, model, (features, labels), ["input", "labels"], ["loss"])
    if name == "transformer":
        src = torch.randint(0, config.vocab_size, (batch, config.src_len), generator=generator)
        tgt = torch.randint(0, config.vocab_size, (batch, config.tgt_len), generator=generator)
        return BuiltModel(name, model, (src, tgt), ["src_ids", "tgt_ids"], ["logits"])
    input_ids = torch.randint(0, config.vocab_size, (batch, config.seq_len), generator=generator)
    if name in ("gpt2", "moe", "moe_top2", "lstm_lm", "gru_tagger"):
        return BuiltModel(name, model, (input_ids,), ["input_ids"], ["logits"])
    attention_mask = torch.ones(batch, config.seq_len, dtype=torch.int64)
    attention_mask[-1, config.seq_len // 2:] = 0  # one padded sequence
    return BuiltModel(name, model, (input_ids, attention_mask), ["input_ids", "attention_mask"],
                      ["last_hidden_state", "pooler_output"])


def perturb_normalization(model: torch.nn.Module, scale: float = 0.1) -> None:
    """Gives normalization layers trained-looking values instead of 1/0.

    Fresh BatchNorm/LayerNorm weights are all ones and biases all zeros, so
    (a) eval BatchNorm would be the identity, hiding numeric errors, and
    (b) torch's eval-mode export would merge the equal tensors into one
    initializer. Uses the global torch RNG (seeded by `build`).
    """
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
                module.weight.add_(scale * torch.randn_like(module.weight))
                module.bias.add_(scale * torch.randn_like(module.bias))
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.add_(scale * torch.randn_like(module.running_mean))
                module.running_var.add_(scale * torch.rand_like(module.running_var))


def count_parameters(model: torch.nn.Module) -> int:
    """Parameters, each shared (tied) tensor once."""
    return sum(p.numel() for p in model.parameters())
