"""How a scope presents its tools: ``present_as``'s options, checked when a scope declares
them and resolved along its chain of layers, nearest declaration first.

Each option (the mode, the code options ``profile`` and ``limits``, the discovery options
``discovery``, ``inline_tokens`` and ``pin``) is kept on the declaring scope's
:class:`~ptc._scopes._layers.Layer` and holds for its subtree unless declared nearer; what no scope
declares comes from the runtime (mode, profile, limits) or from
:class:`~ptc._scopes._layers.Discovery`'s defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from worker import Limits, Profile

from .._errors import ConfigurationError, ScopeError, UsageError
from ._layers import (
    DISCOVERY_MODES,
    MODES,
    PROFILES,
    Discovery,
    DiscoveryMode,
    Layer,
    Mode,
    names_of,
)

__all__ = (
    "check_code_options",
    "check_discovery",
    "declare",
    "resolved_code_options",
    "resolved_discovery",
)


def check_code_options(profile: object, limits: object) -> None:
    """The code options a runtime or ``present_as`` may take."""
    if profile is not None and profile not in PROFILES:
        raise ConfigurationError(f"profile must be one of {PROFILES}, got {profile!r}")
    if limits is not None and not isinstance(limits, Limits):
        raise UsageError("limits must be ptc.Limits")


def check_discovery(discovery: object, inline_tokens: object, pin: object) -> None:
    """The discovery options ``present_as`` may take (``None``: not declared here)."""
    if discovery is not None and discovery not in DISCOVERY_MODES:
        raise ConfigurationError(f"discovery must be one of {DISCOVERY_MODES}, got {discovery!r}")
    if inline_tokens is not None and (
        type(inline_tokens) is not int or not 0 <= inline_tokens <= 10_000_000
    ):
        raise ConfigurationError(f"inline_tokens must be an int >= 0, got {inline_tokens!r}")
    if pin is not None:
        names_of(pin, "pin")  # type: ignore[arg-type]


def declare(
    layer: Layer,
    owner: object,
    mode: Mode,
    *,
    profile: Profile | None,
    limits: Limits | None,
    discovery: DiscoveryMode | None,
    inline_tokens: int | None,
    pin: Iterable[str] | None,
) -> None:
    """Check ``present_as``'s options and keep them on ``layer`` (``owner``, the declaring
    scope, names it in errors). A layer declares its mode once."""
    if mode not in MODES:
        raise ConfigurationError(f"mode must be one of {MODES}, got {mode!r}")
    if layer.mode is not None:
        raise ScopeError(f"{owner!r} already presents as {layer.mode!r}")
    check_code_options(profile, limits)
    check_discovery(discovery, inline_tokens, pin)
    layer.mode, layer.profile, layer.limits = mode, profile, limits
    layer.discovery, layer.inline_tokens = discovery, inline_tokens
    layer.pin = None if pin is None else tuple(dict.fromkeys(pin))


def resolved_code_options(
    layers: Sequence[Layer], defaults: tuple[Mode, Profile, Limits]
) -> tuple[Mode, Profile, Limits]:
    """``(mode, profile, limits)`` for the root-first chain ``layers``, each the nearest
    declaration, else the runtime's (``defaults``)."""
    mode: Mode | None = None
    profile: Profile | None = None
    limits: Limits | None = None
    for layer in reversed(layers):
        mode = mode or layer.mode
        profile = profile or layer.profile
        limits = limits or layer.limits
    default_mode, default_profile, default_limits = defaults
    return (mode or default_mode, profile or default_profile, limits or default_limits)


def resolved_discovery(layers: Sequence[Layer]) -> Discovery:
    """How ``run_code``'s description shows the tools for the root-first chain ``layers``,
    each option the nearest declaration, else :class:`Discovery`'s default."""
    found: dict[str, object] = {}
    for layer in reversed(layers):
        for key, value in (
            ("mode", layer.discovery),
            ("inline_tokens", layer.inline_tokens),
            ("pin", layer.pin),
        ):
            if value is not None:
                found.setdefault(key, value)
    return Discovery(**found)  # type: ignore[arg-type]
