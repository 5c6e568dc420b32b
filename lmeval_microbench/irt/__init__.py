"""Item response theory: item parameters, model fitting and ability estimation."""

from .ability import estimate_abilities, estimate_ability, posterior_draws
from .constant_items import fit_with_constant_items
from .fit import IRTModel
from .params import MODEL_TYPES, ItemParams

__all__ = [
    "MODEL_TYPES",
    "IRTModel",
    "ItemParams",
    "estimate_abilities",
    "estimate_ability",
    "fit_with_constant_items",
    "posterior_draws",
]
