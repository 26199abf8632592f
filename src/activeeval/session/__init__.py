"""Ask/tell evaluation sessions with a crash-safe SQLite journal: one target (Session) or several (MultiSession)."""

from activeeval.session.multi import AskedPair, MultiSession, MultiStatus
from activeeval.session.session import AskedItem, RecordSummary, Session, SessionStatus
from activeeval.session.storage import CorruptedSessionError, Event, ReferenceMismatchError

__all__ = [
           "AskedItem",
           "AskedPair",
           "CorruptedSessionError",
           "Event",
           "MultiSession",
           "MultiStatus",
           "RecordSummary",
           "ReferenceMismatchError",
           "Session",
           "SessionStatus",
]
