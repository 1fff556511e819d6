"""``graphrag-ext serve``: index folders kept loaded behind a JSON API and a page (see :mod:`.app`)."""

from .._lazy import lazy_exports

_EXPORTS = {"Library": ".app", "make_app": ".app", "serve": ".app"}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["Library", "make_app", "serve"]
