"""Ask/tell evaluation sessions with a crash-safe SQLite journal: one target (Session) or several (MultiSession)."""

from activeeval.exceptions import CorruptedSessionError, ReferenceMismatchError
from activeeval.session.journal.storage import Event
from activeeval.session.multi import AskedPair, MultiSession, MultiStatus
from activeeval.session.reference import ReadSettings
from activeeval.session.session import AskedItem, RecordSummary, Session, SessionStatus

__all__ = [
           "AskedItem",
           "AskedPair",
           "CorruptedSessionError",
           "Event",
           "MultiSession",
           "MultiStatus",
           "ReadSettings",
           "RecordSummary",
           "ReferenceMismatchError",
           "Session",
           "SessionStatus",
]
