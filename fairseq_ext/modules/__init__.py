"""nn.Modules and autograd functions that the plugin's models share."""
from fairseq_ext.modules.straight_through_dropout import (
    StraightThroughDropout,
    StraightThroughDropoutFunction,
    add_straight_through_args,
    apply_straight_through_from_args,
    straight_through_dropout,
    use_straight_through_attention_dropout,
)

__all__ = [
    "StraightThroughDropout",
    "StraightThroughDropoutFunction",
    "add_straight_through_args",
    "apply_straight_through_from_args",
    "straight_through_dropout",
    "use_straight_through_attention_dropout",
]
