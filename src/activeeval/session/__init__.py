"""Ask/tell evaluation sessions with a crash-safe SQLite journal."""

from activeeval.session.session import AskedItem, Session, SessionStatus
from activeeval.session.storage import Event, ReferenceMismatchError

__all__ = ["Session", "AskedItem", "SessionStatus", "Event", "ReferenceMismatchError"]
