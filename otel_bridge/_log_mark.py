"""The attribute that marks the logging bridge's handlers (a floor both bridge modules read)."""

__all__ = ["MARK"]

#: Set to True on every bridge handler: the bridge finds its own handlers by it, and the
#: handler tells a bridge handler from any other when deciding what reaches the console.
MARK = "_lens_logging_bridge"
