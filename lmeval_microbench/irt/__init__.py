"""Item response theory: item parameters, model fitting and ability estimation."""

from .ability import estimate_abilities, estimate_ability, posterior_draws
from .constant_items import CONSTANT_ITEM_LOGIT, fit_source_irt, fit_with_constant_items
from .fit import IRTModel
from .params import MODEL_TYPES, ItemParams

__all__ = [
    "CONSTANT_ITEM_LOGIT",
    "MODEL_TYPES",
    "IRTModel",
    "ItemParams",
    "estimate_abilities",
    "estimate_ability",
    "fit_source_irt",
    "fit_with_constant_items",
    "posterior_draws",
]
