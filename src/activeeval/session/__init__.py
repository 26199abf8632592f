"""Ask/tell evaluation sessions with a crash-safe SQLite journal."""

from activeeval.session.session import AskedItem, RecordSummary, Session, SessionStatus
from activeeval.session.storage import CorruptedSessionError, Event, ReferenceMismatchError

__all__ = ["Session", "AskedItem", "SessionStatus", "RecordSummary", "Event", "ReferenceMismatchError",
           "CorruptedSessionError"]
