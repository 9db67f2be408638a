"""Optuna's RDB storage, riding out a database restart (a PostgreSQL failover, a server reboot).

SQLAlchemy's `pool_pre_ping` replaces a connection that died while idle, but a call made while the server
is down fails, and Optuna turns that into a StorageInternalError. Inside a trial that would be a harness
scored 0 (the trial boundary records any failure) or a worker that exits; in the heartbeat thread it ends
the thread, so a trial that is still running would go stale and be run twice. So the calls of a trial's
life wait for the server instead, up to OUTAGE_SECONDS, then fail as before. Other errors (a bad value,
a finished trial) are raised at once.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable

from optuna.exceptions import StorageInternalError
from optuna.storages import RDBStorage
from optuna.trial import TrialState
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, PendingRollbackError, SQLAlchemyError

OUTAGE_SECONDS = 300.0
"""How long a call waits for the database before it fails."""
log = logging.getLogger(__name__)


def lost_connection(error: BaseException) -> bool:
    """An error that says the server was unreachable, not that the request was wrong. A session whose
    connection died mid-transaction says so on its next use (PendingRollbackError)."""
    cause = error.__cause__ if isinstance(error, StorageInternalError) else error
    return isinstance(cause, OperationalError | InterfaceError | PendingRollbackError) or (
        isinstance(cause, DBAPIError) and cause.connection_invalidated)


def drop_session(storage: RDBStorage) -> None:
    """Forget this thread's session: it died with its connection, and the next call opens a new one. (There
    is none yet while the constructor is retried; closing one on a dead connection may fail too.)"""
    sessions = storage.__dict__.get("scoped_session")
    if sessions is not None:
        with contextlib.suppress(SQLAlchemyError):
            sessions.remove()


def retried(method: Callable) -> Callable:
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        delay, deadline, warned = 0.2, time.monotonic() + OUTAGE_SECONDS, False
        while True:
            try:
                return method(self, *args, **kwargs)
            except (StorageInternalError, DBAPIError, PendingRollbackError) as e:
                if not lost_connection(e) or time.monotonic() > deadline:
                    raise
                drop_session(self)
                if not warned:
                    log.warning(f"optuna storage unreachable ({method.__name__}); retrying for up to "
                                f"{OUTAGE_SECONDS:.0f} s")
                    warned = True
                time.sleep(delay)
                delay = min(5.0, delay * 2)

    return call


class ReconnectingStorage(RDBStorage):
    """RDBStorage whose calls wait out a lost database connection (see the module's docstring)."""

    __init__ = retried(RDBStorage.__init__)  # a worker may open the storage while the server restarts
    # What a study calls, through Optuna's _CachedStorage (which also calls the private ones).
    create_new_study = retried(RDBStorage.create_new_study)
    get_all_studies = retried(RDBStorage.get_all_studies)
    get_study_id_from_name = retried(RDBStorage.get_study_id_from_name)
    get_study_name_from_id = retried(RDBStorage.get_study_name_from_id)
    get_study_directions = retried(RDBStorage.get_study_directions)
    get_study_user_attrs = retried(RDBStorage.get_study_user_attrs)
    get_study_system_attrs = retried(RDBStorage.get_study_system_attrs)
    set_study_user_attr = retried(RDBStorage.set_study_user_attr)
    set_study_system_attr = retried(RDBStorage.set_study_system_attr)
    _create_new_trial = retried(RDBStorage._create_new_trial)
    _set_trial_param = retried(RDBStorage._set_trial_param)
    @retried
    def set_trial_state_values(self, trial_id: int, state: TrialState, values=None) -> bool:
        """Claiming an enqueued trial (WAITING -> RUNNING) is one conditional UPDATE, so that two workers
        can never both claim it. Optuna reads the state, then writes it, under SELECT ... FOR UPDATE, which
        sqlite ignores: there two workers ran the same enqueued trial, and the second's tell failed with
        "Cannot tell a COMPLETE trial". Every other transition is Optuna's own."""
        if state != TrialState.RUNNING:
            return RDBStorage.set_trial_state_values(self, trial_id, state, values)
        from datetime import datetime

        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session

        with _create_scoped_session(self.scoped_session) as session:
            claimed = (session.query(models.TrialModel)
                       .filter(models.TrialModel.trial_id == trial_id, models.TrialModel.state == TrialState.WAITING)
                       .update({models.TrialModel.state: TrialState.RUNNING}, synchronize_session=False)) == 1
            if claimed:  # the start time is stored as UTC through the model's setter, as Optuna does
                models.TrialModel.find_or_raise_by_id(trial_id, session).datetime_start = datetime.now()
        return claimed

    set_trial_intermediate_value = retried(RDBStorage.set_trial_intermediate_value)
    set_trial_user_attr = retried(RDBStorage.set_trial_user_attr)
    set_trial_system_attr = retried(RDBStorage.set_trial_system_attr)
    get_trial = retried(RDBStorage.get_trial)
    get_trial_id_from_study_id_trial_number = retried(RDBStorage.get_trial_id_from_study_id_trial_number)
    _get_trials = retried(RDBStorage._get_trials)
    _get_best_trial_id = retried(RDBStorage._get_best_trial_id)
    record_heartbeat = retried(RDBStorage.record_heartbeat)
    _get_stale_trial_ids = retried(RDBStorage._get_stale_trial_ids)
